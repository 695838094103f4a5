"""PS300 cost-duration-divergence: the planner's costs rank two plans against the clock."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, Severity, Side, Verdict
from detector.model.settings import COST_SETTINGS, COST_UNIT_SETTINGS
from detector.model.units import fmt_ratio
from rules.base import rule
from rules.common import emit, fmt_cost, plan_cost, relative_gap, timing_evidence
from rules.gucs import changes_text, settings_changes

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
    min_cost_gap=0.0,
    needs_plan_change=True,
)
def cost_duration_divergence(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """The planner's cost ranks the two plans in the opposite order to the clock.

    ## What it flags
    The baseline and candidate dominant plans differ, and the candidate plan was
    estimated cheaper (by a relative gap of at least `min_cost_gap`, default 0.0:
    any cheaper estimate) but measured slower (timing verdict `regressed`):
    warning. The mirror case, estimated dearer but measured faster (`improved`),
    is info. Inconclusive or unchanged timings never fire. The message gives both
    ratios, candidate over baseline, and the cost-relevant settings that differ
    between the sides.

    The costs come from each side's own planner (disable_cost removed). Under the
    same cost settings they are comparable; when a cost-unit setting differs
    (random_page_cost, seq_page_cost, cpu_tuple_cost, cpu_index_tuple_cost,
    cpu_operator_cost, effective_cache_size) they are in different units: the
    message then adds a caveat naming them, because the ratio of the costs means
    little and the setting itself is the likely explanation (PS500).

    ## Why it matters
    The planner picks the plan it estimates cheapest. Measured on one table, with
    random_page_cost 4 against a real ratio of ~25-35, index and sequential scan
    costs cross at 2.2% selectivity but durations cross at 0.2%, so between the
    two the planner picks the slower plan, up to ~10x slower.
    effective_io_concurrency can change a bitmap scan's duration 4x while its cost
    stays identical, because the cost model ignores prefetch. A misranking will
    recur for other parameter values, not only the measured ones.

    ## Example
    sysbench simple_range: PG 10 Index Scan (cost 28016.1) -> PG 17 Bitmap Heap
    Scan (cost 27962.0), measured 12% slower:

        candidate plan estimated 0.998x the cost (27962.0 vs 28016.1) but measured
        1.12x slower (95% CI 1.08-1.16): the cost model misranks these plans
        (random_page_cost, effective_io_concurrency?)

    ## What to do
    Calibrate the cost settings to the storage and cache the query really sees:
    random_page_cost (higher for uncached random I/O, lower when the active set is
    cached), effective_cache_size, effective_io_concurrency. Re-run the comparison
    after each change; do not pin plans to paper over a cost model that misranks.

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
    if gap < float(options["min_cost_gap"]):
        return
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
    units = settings_changes(comparison.baseline, comparison.candidate, COST_UNIT_SETTINGS)
    if units:
        message += (
            f"; caveat: the costs are not comparable, cost-unit settings differ "
            f"({changes_text(units)})"
        )
    versions = (comparison.baseline.server_version_num, comparison.candidate.server_version_num)
    if None not in versions and versions[0] != versions[1]:
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
        "cost_units_differ": [c.name for c in units],
        **timing_evidence(comparison),
    }
    yield emit("PS300", comparison, message, evidence, severity)
