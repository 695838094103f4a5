"""Row estimates against actual rows, node by node: the q-error, max(est/act, act/est).

What PS301 row-estimate-error and PS302 row-estimate-error-worse measure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from detector.model import Plan
from detector.model.fingerprint import node_label
from detector.model.units import fmt_count
from rules.matching import memo, parallel_divisor, placed_nodes

_SKIPPED = ("BitmapAnd", "BitmapOr")  # these always report 0 actual rows


@dataclass(frozen=True)
class Misestimate:
    """Estimated and actual rows at one node, per execution of its parent."""

    path: str
    label: str
    estimated: float
    actual: float
    q_error: float

    @property
    def direction(self) -> str:
        return "under-estimate" if self.actual > self.estimated else "over-estimate"

    def text(self) -> str:
        return (
            f"{self.label}: {fmt_count(self.estimated)} estimated, "
            f"{fmt_count(self.actual)} actual ({self.direction})"
        )

    def as_evidence(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "node": self.label,
            "estimated_rows": self.estimated,
            "actual_rows": self.actual,
            "q_error": self.q_error,
        }


def misestimates(plan: Plan, min_rows: float) -> list[Misestimate]:
    """Every executed node's q-error, worst first (nodes with fewer than `min_rows` rows,
    estimated and actual, over all loops, are left out).

    EXPLAIN reports rows per loop. A node repeated by its parent (a nested loop's inner
    side) compares per loop. A node run once per parallel participant under a Gather
    compares totals: actual rows times loops against the per-worker estimate times
    PostgreSQL's parallel divisor for the planned workers. A node that a parent may stop
    early (under a Limit, a Merge Join, a semi/anti join's inner side) only counts when it
    returned more rows than estimated. Both sides are clamped to at least one row.
    """
    if not plan.analyzed:
        return []
    return memo(plan, _misestimates, min_rows)


def _misestimates(plan: Plan, min_rows: float) -> list[Misestimate]:
    found: list[Misestimate] = []
    for placed in placed_nodes(plan):
        node = placed.node
        if node.actual_rows is None or not node.actual_loops or node.node_type in _SKIPPED:
            continue
        loops = node.actual_loops
        estimated, actual, executions = node.plan_rows, node.actual_rows, loops
        gather = placed.gather
        if gather is not None and gather.actual_loops:
            participants = (gather.workers_launched or 0) + 1
            if loops <= participants * gather.actual_loops:
                estimated = node.plan_rows * parallel_divisor(gather.workers_planned or 0)
                actual = node.actual_rows * loops / gather.actual_loops
                executions = gather.actual_loops
        if placed.early_stop and actual < estimated:
            continue
        if max(estimated, actual) * executions < min_rows:
            continue
        low, high = sorted((max(estimated, 1.0), max(actual, 1.0)))
        found.append(Misestimate(placed.path, node_label(node), estimated, actual, high / low))
    return sorted(found, key=lambda m: (-m.q_error, m.path))


def q_text(value: float) -> str:
    """A q-error as the messages write it: 1.3x, 100x."""
    return f"{value:.0f}x" if value >= 10 else f"{value:.1f}x"
