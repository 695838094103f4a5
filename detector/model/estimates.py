"""Does a plan flip follow the planner's row estimate? Statistics as the cause of a flip.

Two servers with their own ANALYZE sample estimate a different number of rows for the same
predicate and the same parameter values (4100 on one, 3900 on the other), and near the point
where two plans cost the same that difference alone decides the plan. Then the flip belongs
to the statistics, not to the version's planner or a setting, and the test is in the data a
run already has: every execution's estimated rows for the relation whose access changed, and
the plan it got. Each side's switch point is pinned when that side chose both plans somewhere in
the query's samples and sweep points and every one of its choices follows its estimate: all its
executions with one plan estimated fewer rows than all those with the other, a band [low, high]
with no estimate inside. The flip follows the estimate when the two sides' bands overlap (one
switch point explains every choice of both) and, for the same parameters, their estimates differ
and fall on either side of it. When the bands are disjoint the planner itself moved the switch
point (PostgreSQL 15 switched a sysbench range between 5626 and 5648 estimated rows, 18 between
5424 and 5432), and that is said instead, with the estimates if they differ too.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from detector.model.plan import Plan

MIN_GAP = 0.01  # the sides' estimates for the same parameters differ by at least 1% (median)
_GATHERS = ("Gather", "Gather Merge")


@dataclass(frozen=True)
class Estimated:
    """One execution: which side, sample and sweep point, which of the two plans it got
    ("baseline" or "candidate": the plans the sides chose where they first differed), and the
    planner's estimated rows per relation (its topmost scan node, outside parallel plans)."""

    side: str  # "baseline" | "candidate"
    point: str | None
    sample: int
    plan: str  # "baseline" | "candidate"
    rows: Mapping[str, float]


@dataclass(frozen=True)
class EstimateSwitch:
    """Where each side switches between the two plans, in estimated rows of one relation."""

    relation: str
    baseline_rows: float  # median estimate at the flipped point, for the same parameters
    candidate_rows: float
    baseline_band: tuple[float, float]  # the baseline chose one plan up to [0], the other from [1]
    candidate_band: tuple[float, float]
    candidate_plan_above: bool  # the candidate's plan is the one chosen above the switch
    executions: int

    @property
    def band(self) -> tuple[float, float]:
        """Where both sides switch (empty, low >= high, when their bands are disjoint)."""
        return (
            max(self.baseline_band[0], self.candidate_band[0]),
            min(self.baseline_band[1], self.candidate_band[1]),
        )

    @property
    def estimates_differ(self) -> bool:
        return _gap(self.baseline_rows, self.candidate_rows) >= MIN_GAP

    @property
    def follows_estimate(self) -> bool:
        """One switch point explains both sides' choices, and their estimates put the flipped
        point's parameters on either side of it."""
        low, high = self.band
        ordered = (self.candidate_rows > self.baseline_rows) == self.candidate_plan_above
        return low < high and self.estimates_differ and ordered

    def as_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "relation": self.relation,
            "baseline_rows": self.baseline_rows,
            "candidate_rows": self.candidate_rows,
            "baseline_switch": list(self.baseline_band),
            "candidate_switch": list(self.candidate_band),
            "candidate_plan_above": self.candidate_plan_above,
            "follows_estimate": self.follows_estimate,
            "executions": self.executions,
        }
        if self.follows_estimate:
            info["switch_low"], info["switch_high"] = self.band
        return info


def scan_estimates(plan: Plan) -> dict[str, float]:
    """Estimated rows of each relation's topmost scan node; relations read under a Gather are
    left out (their rows are per worker)."""
    found: dict[str, float] = {}
    parallel: list[str] = []
    for path, node in plan.nodes():
        if node.node_type in _GATHERS:
            parallel.append(path + ".")
            continue
        relation = node.qualified_relation
        if relation is None or relation in found:
            continue
        if any(path.startswith(prefix) for prefix in parallel):
            found[relation] = float("nan")
            continue
        found[relation] = node.plan_rows
    return {name: rows for name, rows in found.items() if rows == rows}


def estimate_switch(executions: Iterable[Estimated], point: str | None) -> EstimateSwitch | None:
    """Each side's switch point in estimated rows, for the relation whose choices both sides'
    estimates explain (the one whose estimates differ most at `point` when several do); None
    when for no relation each side chose both plans and separated them by its estimates."""
    rows = list(executions)
    relations = {name for e in rows for name in e.rows}
    found = [s for s in (_switch(rows, name, point) for name in sorted(relations)) if s]
    if not found:
        return None
    return max(found, key=lambda s: (s.follows_estimate, _gap(s.baseline_rows, s.candidate_rows)))


def _switch(rows: Sequence[Estimated], relation: str, point: str | None) -> EstimateSwitch | None:
    known = [e for e in rows if relation in e.rows]
    at_point: dict[int, dict[str, float]] = defaultdict(dict)
    for e in known:
        if e.point == point:
            at_point[e.sample][e.side] = e.rows[relation]
    same = [(s["baseline"], s["candidate"]) for s in at_point.values() if len(s) == 2]
    if not same:
        return None
    base = statistics.median(b for b, _ in same)
    cand = statistics.median(c for _, c in same)
    for above in (True, False):
        high_plan = "candidate" if above else "baseline"
        bands = [_band(known, side, relation, high_plan) for side in ("baseline", "candidate")]
        if bands[0] is not None and bands[1] is not None:
            return EstimateSwitch(relation, base, cand, bands[0], bands[1], above, len(known))
    return None


def _band(
    known: Sequence[Estimated], side: str, relation: str, high_plan: str
) -> tuple[float, float] | None:
    """(the highest estimate of the low plan, the lowest of the high plan) on one side, when it
    chose both plans and every choice follows its estimate; else None."""
    low = [e.rows[relation] for e in known if e.side == side and e.plan != high_plan]
    high = [e.rows[relation] for e in known if e.side == side and e.plan == high_plan]
    if not low or not high or max(low) >= min(high):
        return None
    return max(low), min(high)


def _gap(a: float, b: float) -> float:
    top = max(abs(a), abs(b))
    return abs(a - b) / top if top > 0 else 0.0
