"""Helpers shared by rule families: severity from the verdict, number formatting, evidence."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from detector.model import (
    Plan,
    PlanNode,
    PlanVariant,
    QueryComparison,
    Severity,
    Side,
    TimingStats,
    Verdict,
    normalized_cost,
)
from detector.model.units import fmt_count, fmt_duration
from rules.matching import memo, plan_nodes


def flip_severity(verdict: Verdict, near_tie: bool = False) -> Severity:
    """Severity of a plan flip from the measured verdict (DESIGN.md: flips are facts).

    regressed -> error; improved -> info; unchanged/inconclusive -> warning, or info when
    the two plans' costs are a near-tie (a boundary flip the clock does not confirm).
    """
    if verdict is Verdict.REGRESSED:
        return Severity.ERROR
    if verdict is Verdict.IMPROVED or near_tie:
        return Severity.INFO
    return Severity.WARNING


def plan_cost(variant: PlanVariant) -> float:
    """The variant's median total cost with PG <= 17's disable_cost removed."""
    return normalized_cost(variant.median_cost)


@dataclass(frozen=True)
class Tie:
    """How close a flip's two plans are by the planner's cost."""

    tied: bool
    baseline_cost: float
    candidate_cost: float
    # the plan the candidate rejected, costed on the candidate (the run's forced EXPLAIN);
    # then candidate_cost is the chosen plan's cost planned the same way
    rejected_cost: float | None = None
    # the share of the candidate's own samples at this point that chose the rejected plan
    rejected_share: float = 0.0

    def text(self) -> str:
        if self.rejected_cost is not None:
            chose = (
                f", which the candidate itself chose for {self.rejected_share:.0%} of its samples"
                if self.rejected_share
                else ""
            )
            return (
                f"near-tie on the candidate (chosen plan cost {fmt_cost(self.candidate_cost)} vs "
                f"{fmt_cost(self.rejected_cost)} for the rejected one{chose})"
            )
        return f"near-tie (costs {fmt_cost(self.baseline_cost)} vs {fmt_cost(self.candidate_cost)})"

    def evidence(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "baseline_cost": self.baseline_cost,
            "candidate_cost": self.candidate_cost,
            "near_tie": self.tied,
        }
        if self.rejected_cost is not None:
            found["rejected_cost"] = self.rejected_cost
            found["rejected_share"] = self.rejected_share
            found["near_tie_basis"] = "candidate"
        return found


def near_tie(comparison: QueryComparison, threshold: float) -> Tie:
    """Whether the flip's two plans cost within `threshold` of each other.

    From the same server when the run forced the rejected plan on the candidate (attribution
    `near_tie`: chosen and rejected plan planned on the candidate for the same parameters, the
    median gap over the flipped samples): that gap does not move with how two servers' ANALYZE
    samples differ. A candidate that chose the rejected plan itself for some of the point's
    parameters sits on its own switch point: a near-tie whatever the gap of the flipped samples
    (which grows with their distance from it), so the severity holds from run to run.
    Otherwise the two sides' chosen-plan costs: per sample for sides of one interleaved run
    (sample i had the same parameters on both), else the dominant plans' median costs."""
    if _LAST_TIE and _LAST_TIE[0][0] is comparison and _LAST_TIE[0][1] == threshold:
        return _LAST_TIE[0][2]
    forced = (comparison.attribution or {}).get("near_tie")
    base_samples = comparison.baseline.by_sample()
    cand_samples = comparison.candidate.by_sample()
    common = sorted(base_samples.keys() & cand_samples.keys())
    if common:
        base_costs = [normalized_cost(base_samples[i][1]) for i in common]
        cand_costs = [normalized_cost(cand_samples[i][1]) for i in common]
        gaps = list(map(relative_gap, base_costs, cand_costs))
        base, cand = statistics.median(base_costs), statistics.median(cand_costs)
        tied = statistics.median(gaps) < threshold
    else:
        base = plan_cost(comparison.baseline.dominant)
        cand = plan_cost(comparison.candidate.dominant)
        tied = relative_gap(base, cand) < threshold
    tie = Tie(tied, base, cand)
    if isinstance(forced, Mapping) and forced.get("rejected_cost") is not None:
        chosen, rejected = float(forced["chosen_cost"]), float(forced["rejected_cost"])
        rejected_fp = comparison.baseline.dominant.fingerprint
        samples = comparison.candidate.samples
        share = sum(v.samples for v in comparison.candidate.plans if v.fingerprint == rejected_fp)
        share_of = share / samples if samples else 0.0
        tied = float(forced["gap"]) < threshold or share_of > 0
        tie = Tie(tied, base, chosen, rejected, share_of)
    _LAST_TIE[:] = [(comparison, threshold, tie)]
    return tie


# the comparison and threshold near_tie last answered, and its answer: a plan flip's rules
# ask in turn about the same comparison
_LAST_TIE: list[tuple[QueryComparison, float, Tie]] = []


@dataclass(frozen=True)
class FlipContext:
    """What every plan-flip finding adds: severity, the clock, a near-tie note, evidence."""

    severity: Severity
    tail: tuple[str, ...]
    evidence: dict[str, Any]


def flip_context(comparison: QueryComparison, near_tie_threshold: float | None) -> FlipContext:
    """Severity from the verdict (info for an unconfirmed near-tie), message tail, evidence.

    `near_tie_threshold=None` for changes that are not plan-shape flips (JIT, heap fetches):
    no near-tie test, the severity follows the verdict alone.
    """
    if near_tie_threshold is not None:
        tie = near_tie(comparison, near_tie_threshold)
    else:
        base = plan_cost(comparison.baseline.dominant)
        tie = Tie(False, base, plan_cost(comparison.candidate.dominant))
    tail = [comparison.timing.describe()]
    if tie.tied:
        tail.append(tie.text())
    evidence: dict[str, Any] = {**tie.evidence(), **timing_evidence(comparison)}
    return FlipContext(flip_severity(comparison.timing.verdict, tie.tied), tuple(tail), evidence)


def relative_gap(a: float, b: float) -> float:
    """|a - b| / max(|a|, |b|): 0 for equal values, 0.01 for costs 1% apart."""
    top = max(abs(a), abs(b))
    return abs(a - b) / top if top > 0 else 0.0


def fmt_cost(value: float) -> str:
    return f"{value:.1f}"


def fmt_blocks(blocks: float) -> str:
    """`1082 blocks (8.5 MB)` with 8 kB blocks."""
    size = blocks * 8 / 1024
    unit = f"{size:.1f} MB" if size < 1024 else f"{size / 1024:.1f} GB"
    return f"{fmt_count(blocks)} blocks ({unit})"


def census(side: Side, who: str) -> str | None:
    """`candidate used 2 shapes: 70% A, 30% B` when a side mixes plan shapes, else None."""
    total = side.samples
    if len(side.plans) < 2 or total <= 0:
        return None
    parts = [f"{100 * v.samples / total:.0f}% {v.signature}" for v in side.plans]
    return f"{who} used {len(side.plans)} shapes: " + ", ".join(parts)


def census_evidence(side: Side) -> list[dict[str, Any]]:
    return [
        {"fingerprint": v.fingerprint, "signature": v.signature, "samples": v.samples}
        for v in side.plans
    ]


def percentiles_text(baseline: TimingStats | None, candidate: TimingStats | None) -> str | None:
    """`median 2.10 ms -> 2.60 ms, p90 2.40 ms -> 3.10 ms` (None without both sides' stats)."""
    if baseline is None or candidate is None:
        return None
    return (
        f"median {fmt_duration(baseline.median_ms)} -> {fmt_duration(candidate.median_ms)}, "
        f"p90 {fmt_duration(baseline.p90_ms)} -> {fmt_duration(candidate.p90_ms)}"
    )


def timing_evidence(comparison: QueryComparison) -> dict[str, Any]:
    """The measured numbers every finding carries: verdict, ratio, CI, per-side percentiles."""
    timing = comparison.timing
    evidence: dict[str, Any] = {
        "verdict": timing.verdict.value,
        "ratio": timing.ratio,
        "ci_low": timing.ci_low,
        "ci_high": timing.ci_high,
        "p_value": timing.p_value,
        "min_effect": timing.min_effect,
        "noise_floor": timing.noise_floor,
    }
    for (samples, median, p90, p99), side in zip(
        _SIDE_KEYS, (comparison.baseline, comparison.candidate), strict=True
    ):
        stats = side.timing
        evidence[samples] = stats.n if stats else len(side.durations_ms)
        evidence[median] = stats.median_ms if stats else None
        evidence[p90] = stats.p90_ms if stats else None
        evidence[p99] = stats.p99_ms if stats else None
    return evidence


_SIDE_KEYS = [
    (f"{who}_samples", f"{who}_median_ms", f"{who}_p90_ms", f"{who}_p99_ms")
    for who in ("baseline", "candidate")
]


def node_at(plan: Plan, path: str) -> PlanNode:
    """The node at a `walk()` path such as '0.1.0'."""
    return memo(plan, _by_path)[path]


def _by_path(plan: Plan) -> dict[str, PlanNode]:
    return dict(plan_nodes(plan))
