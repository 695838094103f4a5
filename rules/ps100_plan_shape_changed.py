"""PS100 plan-shape-changed: the dominant plan shape differs between the sides."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, Severity
from rules.base import rule
from rules.common import census, census_evidence, flip_severity, timing_evidence
from rules.common import near_tie as _near_tie


@rule(
    "PS100",
    "plan-shape-changed",
    "plan-flip",
    Severity.WARNING,
    near_tie=0.02,
    needs_plan_change=True,
)
def plan_shape_changed(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """The dominant plan shape differs between baseline and candidate.

    ## What it flags
    A query whose most frequent plan fingerprint on the candidate is not the
    baseline's. The fingerprint ignores constants, costs, row counts, timings and
    aliases, so only a different plan shape (scan type, join method or order,
    index, strategy) counts.

    Severity follows the measured timing verdict: regressed -> error, improved ->
    info, unchanged or inconclusive -> warning. When the two plans' total costs
    are within `near_tie` (relative, default 0.02 = 2%) of each other the flip is
    a near-tie: the planner sits at a switch point, and a near-tie that is not
    measured slower is info. When a side mixed several shapes, the message lists
    the census.

    ## Why it matters
    Plan flips are the commonest cause of sudden slowdowns after an upgrade or a
    settings change, and a flip is a fact even when the clock cannot tell yet.
    Near a switch point (measured on one table: the index and sequential scans'
    costs crossed at 2.2% selectivity, their durations at 0.2%) the choice
    changes with every ANALYZE sample and parameter value.

    ## Example
    sysbench simple_range (`SELECT c FROM sbtest1 WHERE id BETWEEN $1 AND $2`,
    8000 rows): PG 10 Index Scan (cost 28016.1) -> PG 17 Bitmap Heap Scan (cost
    27962.0):

        plan changed: IndexScan(sbtest1 sbtest1_pkey) -> BitmapHeapScan(sbtest1) >
        BitmapIndexScan(sbtest1_pkey); 1.12x slower (95% CI 1.08-1.16); near-tie
        (costs 28016.1 vs 27962.0)

    Measured slower, so an error despite the near-tie.

    ## What to do
    Look at the more specific plan-flip findings (PS101 ...) for the node that
    changed. If the candidate is slower, compare the settings of both sides
    (random_page_cost, effective_io_concurrency, work_mem) and refresh statistics
    (ANALYZE) before blaming the version; pin the old plan only as a stopgap
    (pg_hint_plan, per-query SET).

    ## References
    - Using EXPLAIN: https://www.postgresql.org/docs/current/using-explain.html
    - Planner/optimizer:
      https://www.postgresql.org/docs/current/planner-optimizer.html
    - Planner method and cost settings (enable_*, random_page_cost):
      https://www.postgresql.org/docs/current/runtime-config-query.html
    - Statistics used by the planner:
      https://www.postgresql.org/docs/current/planner-stats.html
    """
    if not comparison.plan_changed:
        return
    base_variant, cand_variant = comparison.baseline.dominant, comparison.candidate.dominant
    tie = _near_tie(comparison, float(options["near_tie"]))
    parts = [
        f"plan changed: {base_variant.signature} -> {cand_variant.signature}",
        comparison.timing.describe(),
    ]
    if tie.tied:
        parts.append(tie.text())
    for who, side in (("baseline", comparison.baseline), ("candidate", comparison.candidate)):
        mixed = census(side, who)
        if mixed:
            parts.append(mixed)
    evidence: dict[str, Any] = {
        "baseline_fingerprint": base_variant.fingerprint,
        "candidate_fingerprint": cand_variant.fingerprint,
        "baseline_signature": base_variant.signature,
        "candidate_signature": cand_variant.signature,
        **tie.evidence(),
        "baseline_plans": census_evidence(comparison.baseline),
        "candidate_plans": census_evidence(comparison.candidate),
        **timing_evidence(comparison),
    }
    severity = flip_severity(comparison.timing.verdict, tie.tied)
    yield plan_shape_changed.finding(comparison, "; ".join(parts), evidence, severity)
