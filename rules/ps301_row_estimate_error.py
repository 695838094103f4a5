"""PS301 row-estimate-error: the candidate's row estimate is far off (q-error)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, Plan, QueryComparison, Severity
from rules.base import rule
from rules.common import timing_evidence
from rules.row_estimates import Misestimate, misestimates, q_text


def _over(plan: Plan, options: Mapping[str, Any]) -> list[Misestimate]:
    """The plan's misestimates at or over the threshold, worst first."""
    threshold = float(options["threshold"])
    return [m for m in misestimates(plan, float(options["min_rows"])) if m.q_error >= threshold]


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
    message = f"row estimate {q_text(worst.q_error)} off at {worst.text()}"
    if len(over) > 1:
        message += f"; {len(over)} nodes over {q_text(threshold)}"
    evidence: dict[str, Any] = {
        "worst": worst.as_evidence(),
        "nodes": [m.as_evidence() for m in over],
        "threshold": threshold,
        **timing_evidence(comparison),
    }
    yield row_estimate_error.finding(comparison, message, evidence)
