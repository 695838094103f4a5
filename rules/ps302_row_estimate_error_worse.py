"""PS302 row-estimate-error-worse: the worst row estimate got much worse than the baseline's."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, Plan, QueryComparison, Severity
from rules.base import rule
from rules.common import timing_evidence
from rules.row_estimates import Misestimate, misestimates, q_text


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
    message = (
        f"worst row estimate error {q_text(base_q)} -> {q_text(worst.q_error)}: {worst.text()}"
    )
    if base:
        message += f"; baseline {base[0].text()}"
    evidence: dict[str, Any] = {
        "baseline_worst": base[0].as_evidence() if base else None,
        "candidate_worst": worst.as_evidence(),
        "growth": worst.q_error / base_q,
        **timing_evidence(comparison),
    }
    yield row_estimate_error_worse.finding(comparison, message, evidence)
