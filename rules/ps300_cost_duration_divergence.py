"""PS300 cost-duration-divergence: the planner's costs rank two plans against the clock."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, Severity, Side, Verdict
from detector.model.settings import COST_SETTINGS, COST_UNIT_SETTINGS
from detector.model.units import fmt_ratio
from rules.base import rule
from rules.common import fmt_cost, plan_cost, relative_gap, timing_evidence
from rules.gucs import settings_changes

_GENERIC_HINT = "random_page_cost, effective_io_concurrency?"


def settings_diff(baseline: Side, candidate: Side) -> dict[str, tuple[str | None, str | None]]:
    """Cost-relevant settings whose recorded values differ between the sides (None: not set)."""
    diff: dict[str, tuple[str | None, str | None]] = {}
    for name in COST_SETTINGS:
        before, after = baseline.settings.get(name), candidate.settings.get(name)
        if before != after:
            diff[name] = (before, after)
    return diff


def _hint(diff: Mapping[str, tuple[str | None, str | None]]) -> str:
    if not diff:
        return _GENERIC_HINT
    changes = [f"{k} {v[0] or 'default'} -> {v[1] or 'default'}" for k, v in diff.items()]
    return "settings differ: " + ", ".join(changes)


@rule(
    "PS300",
    "cost-duration-divergence",
    "divergence",
    Severity.WARNING,
    min_cost_gap=0.05,
    version_cost_gap=0.2,
    needs_plan_change=True,
)
def cost_duration_divergence(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """The planner's cost ranks the two plans in the opposite order to the clock.

    ## What it flags
    The baseline and candidate dominant plans differ, and the candidate plan was
    estimated cheaper but measured slower (timing verdict `regressed`): warning.
    The mirror case, estimated dearer but measured faster (`improved`), is info.
    Inconclusive or unchanged timings never fire. The message gives both
    ratios, candidate over baseline, and the cost-relevant settings that differ
    between the sides.

    Only where the two costs compare, outside a tie:
    - no cost-unit setting differs (random_page_cost, seq_page_cost,
      cpu_tuple_cost, cpu_index_tuple_cost, cpu_operator_cost,
      effective_cache_size): with different units the ratio of the costs means
      nothing, and the setting itself is the explanation (PS500);
    - the costs are at least `min_cost_gap` apart (relative, default 0.05):
      plans within 5% are a tie the planner could break either way (PS100
      calls the closest ones near-ties);
    - when the server versions differ, at least `version_cost_gap` apart
      (default 0.2): each version's planner costs the same plan differently,
      and its executor moves durations without any cost change.

    The costs come from each side's own planner (disable_cost removed).

    ## Why it matters
    The planner picks the plan it estimates cheapest. Measured on one table,
    with random_page_cost 4 against a real ratio of ~25-35, index and
    sequential scan costs cross at 2.2% selectivity but durations cross at
    0.2%, so between the two the planner picks the slower plan, up to ~10x
    slower. effective_io_concurrency can change a bitmap scan's duration 4x
    while its cost stays identical, because the cost model ignores prefetch. A
    misranking will recur for other parameter values, not only the measured
    ones.

    ## Example
    A full scan on PG 15, parallelism made free on the candidate
    (parallel_setup_cost and parallel_tuple_cost 0), as captured:

        candidate plan estimated 0.85x the cost (8073.7 vs 9532.1) but
        measured 1.46x slower (95% CI 1.43-1.49): the cost model misranks
        these plans (settings differ: parallel_setup_cost default -> 0,
        parallel_tuple_cost default -> 0, max_parallel_workers_per_gather 0
        -> 2, min_parallel_table_scan_size default -> 0)

    ## What to do
    Calibrate the cost settings to the storage and cache the query really sees:
    random_page_cost (higher for uncached random I/O, lower when the active set is
    cached), effective_cache_size, effective_io_concurrency; for parallel plans
    parallel_setup_cost and parallel_tuple_cost. Re-run the comparison after
    each change; do not pin plans to paper over a cost model that misranks.

    ## References
    - Planner cost constants (random_page_cost, seq_page_cost):
      https://www.postgresql.org/docs/current/runtime-config-query.html
    - Using EXPLAIN: https://www.postgresql.org/docs/current/using-explain.html
    - Planner/optimizer:
      https://www.postgresql.org/docs/current/planner-optimizer.html
    """
    if not comparison.plan_changed:
        return
    verdict = comparison.timing.verdict
    ratio = comparison.timing.ratio
    if ratio is None or verdict not in (Verdict.REGRESSED, Verdict.IMPROVED):
        return
    base_cost = plan_cost(comparison.baseline.dominant)
    cand_cost = plan_cost(comparison.candidate.dominant)
    if base_cost <= 0 or cand_cost <= 0:
        return
    gap = relative_gap(base_cost, cand_cost)
    versions = (comparison.baseline.server_version_num, comparison.candidate.server_version_num)
    versions_differ = None not in versions and versions[0] != versions[1]
    margin = float(options["version_cost_gap" if versions_differ else "min_cost_gap"])
    if gap < max(margin, float(options["min_cost_gap"])):
        return
    if settings_changes(comparison.baseline, comparison.candidate, COST_UNIT_SETTINGS):
        return  # costs in different units do not rank anything
    if verdict is Verdict.REGRESSED and cand_cost < base_cost:
        clock, severity = f"measured {comparison.timing.describe()}", Severity.WARNING
    elif verdict is Verdict.IMPROVED and cand_cost > base_cost:
        clock, severity = f"measured {comparison.timing.describe()}", Severity.INFO
    else:
        return
    cost_ratio = cand_cost / base_cost
    diff = settings_diff(comparison.baseline, comparison.candidate)
    message = (
        f"candidate plan estimated {fmt_ratio(cost_ratio)}x the cost "
        f"({fmt_cost(cand_cost)} vs {fmt_cost(base_cost)}) but {clock}: "
        f"the cost model misranks these plans ({_hint(diff)})"
    )
    if versions_differ:
        message += (
            "; caveat: the versions differ, and executor changes move durations "
            "without any cost change (compare same-plan queries of this run)"
        )
    evidence: dict[str, Any] = {
        "baseline_signature": comparison.baseline.dominant.signature,
        "candidate_signature": comparison.candidate.dominant.signature,
        "baseline_cost": base_cost,
        "candidate_cost": cand_cost,
        "cost_ratio": cost_ratio,
        "cost_gap": gap,
        "settings_diff": {k: list(v) for k, v in diff.items()},
        "versions_differ": versions_differ,
        **timing_evidence(comparison),
    }
    yield cost_duration_divergence.finding(comparison, message, evidence, severity)
