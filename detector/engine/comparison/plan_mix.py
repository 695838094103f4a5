"""A change of a query's plan mix between two sides, when its dominant plan stayed the same.

A query whose plan depends on its parameters runs several plans on each side (a prepared
statement: Bitmap Heap Scan for big customers, Index Scan for small ones and for the generic
plan). When a setting flips some of those executions to another plan (70 of 180 executions
Bitmap Heap Scan before, 0 after), the dominant plan stays what it was: this says what changed.

A plan's share counts when it moved by at least `MIN_SHIFT` (absolute) and Fisher's exact test
on its counts (this plan or another, baseline or candidate) is significant at `alpha` after a
Bonferroni correction over the query's plans: shares that differ by the draw of parameters in
a small sample are not a change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from detector.model import QueryComparison

MIN_SHIFT = 0.10


@dataclass(frozen=True)
class MixShift:
    """One plan whose share of the executions moved."""

    signature: str
    baseline: int  # executions with this plan
    baseline_total: int
    candidate: int
    candidate_total: int
    p_value: float

    def describe(self) -> str:
        return (
            f"{self.signature} {self.baseline}/{self.baseline_total} -> "
            f"{self.candidate}/{self.candidate_total}"
        )


def plan_mix_shifts(
    query: QueryComparison, alpha: float = 0.05, min_shift: float = MIN_SHIFT
) -> list[MixShift]:
    """The plans whose share moved, most moved first; [] when either side ran one plan only
    and it is the same (the common case: nothing is tested)."""
    base, cand = query.baseline, query.candidate
    if len(base.plans) < 2 and len(cand.plans) < 2 and not query.plan_changed:
        return []
    before = {plan.fingerprint: plan.samples for plan in base.plans}
    after = {plan.fingerprint: plan.samples for plan in cand.plans}
    names = {plan.fingerprint: plan.signature for plan in (*base.plans, *cand.plans)}
    n_before, n_after = base.samples, cand.samples
    if not n_before or not n_after:
        return []
    found = []
    for fingerprint in sorted(names):
        b, c = before.get(fingerprint, 0), after.get(fingerprint, 0)
        if abs(c / n_after - b / n_before) < min_shift:
            continue
        table = np.array([[b, n_before - b], [c, n_after - c]])
        p_value = float(sps.fisher_exact(table).pvalue)
        if p_value * len(names) < alpha:
            found.append(MixShift(names[fingerprint], b, n_before, c, n_after, p_value))
    found.sort(key=lambda s: -abs(s.candidate / n_after - s.baseline / n_before))
    return found


def mix_text(query: QueryComparison) -> str | None:
    """`plan mix changed: A 70/180 -> 0/180, B 110/180 -> 180/180` when the dominant plan
    stayed and the mix moved; None otherwise."""
    if query.plan_changed:
        return None
    shifts = plan_mix_shifts(query)
    if not shifts:
        return None
    return "plan mix changed: " + ", ".join(shift.describe() for shift in shifts)
