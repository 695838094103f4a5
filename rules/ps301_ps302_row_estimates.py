"""PS301-PS302 row estimates against actual rows: the q-error, max(est/act, act/est).

PS301 row-estimate-error and PS302 row-estimate-error-worse share `misestimates`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from detector.model import Finding, Plan, QueryComparison, Severity
from detector.model.fingerprint import node_label
from rules.base import rule
from rules.common import emit, fmt_count, timing_evidence
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


def _q(value: float) -> str:
    return f"{value:.0f}x" if value >= 10 else f"{value:.1f}x"


def _over(plan: Plan, options: Mapping[str, Any]) -> list[Misestimate]:
    """The plan's misestimates at or over the threshold, worst first."""
    threshold = float(options["threshold"])
    return [m for m in misestimates(plan, float(options["min_rows"])) if m.q_error >= threshold]


def _worse(
    base_plan: Plan, cand_plan: Plan, options: Mapping[str, Any]
) -> tuple[Misestimate, list[Misestimate]] | None:
    """The candidate's worst misestimate and the baseline's worst q-error, when the former is
    over the threshold and at least `min_growth` times the latter (both plans analyzed)."""
    min_rows = float(options["min_rows"])
    if not base_plan.analyzed:
        return None
    cand = misestimates(cand_plan, min_rows)
    if not cand or cand[0].q_error < float(options["threshold"]):
        return None
    base = misestimates(base_plan, min_rows)
    base_q = base[0].q_error if base else 1.0
    if cand[0].q_error < float(options["min_growth"]) * base_q:
        return None
    return cand[0], base


@rule(
    "PS301",
    "row-estimate-error",
    "estimates",
    Severity.INFO,
    gate=lambda c, o: bool(_over(c.candidate.dominant.plan, o)),
    threshold=10.0,
    min_rows=100,
)
def row_estimate_error(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """A node of the candidate's plan returned far more or fewer rows than estimated.

    ## What it flags
    In the candidate's dominant plan (executed with ANALYZE), the node with the
    worst q-error, max(estimated/actual, actual/estimated), when it reaches
    `threshold` (default 10.0). Nodes where neither the estimate nor the actual
    count reaches `min_rows` (default 100, over all loops) are left out: 1 row
    estimated and 12 returned is not worth a finding. The message names the worst
    node and counts the others over the threshold; the evidence lists them all.

    Rows compare per loop for a node its parent repeats, as totals for a node run
    once per parallel worker (per-worker estimate times the parallel divisor), and
    a node that a Limit, a Merge Join or a semi/anti join may stop early only
    counts when it returned more rows than estimated. Info: an estimate error is a
    cause, not a symptom; PS302 warns when it got worse.

    ## Why it matters
    Every plan choice (scan, join method, join order, hash or sort, Memoize,
    parallelism) rests on row estimates; a node estimated 100x off makes every
    cost above it fiction, and plans built on fiction flip at the next ANALYZE or
    version. Correlated columns are the classic case: the planner multiplies
    their selectivities as if they were independent.

    ## Example
    `a = 7 AND b = 7` on perfectly correlated columns (PG 15):

        row estimate 100x off at SeqScan(sbtest_correlated): 10 estimated,
        1000 actual (under-estimate)

    ## What to do
    ANALYZE the tables (raise the column's statistics target for skewed data:
    ALTER TABLE ... ALTER COLUMN ... SET STATISTICS 1000). For correlated columns
    create extended statistics (CREATE STATISTICS ... (dependencies, mcv)); for
    expressions, statistics on the expression. Rewrite predicates the planner
    cannot estimate (functions of columns, LIKE '%...%').

    ## References
    - Statistics used by the planner:
      https://www.postgresql.org/docs/current/planner-stats.html
    - Row estimation examples:
      https://www.postgresql.org/docs/current/row-estimation-examples.html
    - Extended statistics (CREATE STATISTICS):
      https://www.postgresql.org/docs/current/sql-createstatistics.html
    - ANALYZE: https://www.postgresql.org/docs/current/sql-analyze.html
    """
    over = _over(comparison.candidate.dominant.plan, options)
    if not over:
        return
    threshold = float(options["threshold"])
    worst = over[0]
    message = f"row estimate {_q(worst.q_error)} off at {worst.text()}"
    if len(over) > 1:
        message += f"; {len(over)} nodes over {_q(threshold)}"
    evidence: dict[str, Any] = {
        "worst": worst.as_evidence(),
        "nodes": [m.as_evidence() for m in over],
        "threshold": threshold,
        **timing_evidence(comparison),
    }
    yield emit("PS301", comparison, message, evidence)


@rule(
    "PS302",
    "row-estimate-error-worse",
    "estimates",
    Severity.WARNING,
    gate=lambda c, o: _worse(c.baseline.dominant.plan, c.candidate.dominant.plan, o) is not None,
    threshold=10.0,
    min_growth=2.0,
    min_rows=100,
)
def row_estimate_error_worse(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """The worst row-estimate error got worse from baseline to candidate.

    ## What it flags
    The candidate's worst q-error (computed as in PS301) reaches `threshold`
    (default 10.0) and is at least `min_growth` (default 2.0) times the
    baseline's worst q-error. Both plans must have been executed with ANALYZE.
    Fires whatever the timing verdict: a plan that is as fast as before on worse
    estimates is a regression waiting for the next data change.

    ## Why it matters
    An estimate that got worse means the planner knows less about the data than
    before: statistics were lost (a dropped CREATE STATISTICS, a reset statistics
    target, a table not ANALYZEd after a bulk load or pg_upgrade, which does not
    carry planner statistics before PG 18), or a new version estimates a
    predicate differently. The plan may survive today and flip when the data or
    a parameter moves.

    ## Example
    Extended statistics on the correlated columns dropped on the candidate
    (PG 15):

        worst row estimate error 1.0x -> 100x: SeqScan(sbtest_correlated): 10
        estimated, 1000 actual (under-estimate); baseline
        SeqScan(sbtest_correlated): 1003 estimated, 1000 actual
        (over-estimate)

    ## What to do
    ANALYZE the candidate (after pg_upgrade: vacuumdb --all --analyze-in-stages
    on versions before 18), compare pg_stats and pg_statistic_ext between the
    two sides, and recreate missing extended statistics.

    ## References
    - Statistics used by the planner:
      https://www.postgresql.org/docs/current/planner-stats.html
    - Extended statistics (CREATE STATISTICS):
      https://www.postgresql.org/docs/current/sql-createstatistics.html
    - Updating planner statistics (ANALYZE):
      https://www.postgresql.org/docs/current/routine-vacuuming.html
    """
    found = _worse(comparison.baseline.dominant.plan, comparison.candidate.dominant.plan, options)
    if found is None:
        return
    worst, base = found
    base_q = base[0].q_error if base else 1.0
    message = f"worst row estimate error {_q(base_q)} -> {_q(worst.q_error)}: {worst.text()}"
    if base:
        message += f"; baseline {base[0].text()}"
    evidence: dict[str, Any] = {
        "baseline_worst": base[0].as_evidence() if base else None,
        "candidate_worst": worst.as_evidence(),
        "growth": worst.q_error / base_q,
        **timing_evidence(comparison),
    }
    yield emit("PS302", comparison, message, evidence)
