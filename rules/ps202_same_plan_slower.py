"""PS202 same-plan-slower: slower with the same plan at the same cost."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, Severity, Verdict
from rules.base import rule
from rules.common import fmt_cost, plan_cost, relative_gap
from rules.timing_messages import clock_hint, verdict_evidence


@rule(
    "PS202",
    "same-plan-slower",
    "timing",
    Severity.WARNING,
    gate=lambda c, _: not c.plan_changed and c.timing.verdict is Verdict.REGRESSED,
    max_cost_change=0.05,
)
def same_plan_slower(comparison: QueryComparison, options: Mapping[str, Any]) -> Iterator[Finding]:
    """The candidate is measured slower with the same plan at the same cost.

    ## What it flags
    A query whose timing verdict is `regressed` while the dominant plan shape is
    the same on both sides and its estimated cost moved by less than
    `max_cost_change` (relative, default 0.05). The planner saw no difference,
    the clock did. The message names the differing settings that change
    durations without changing any cost (i/o first: effective_io_concurrency,
    maintenance_io_concurrency, io_method, io_combine_limit, shared_buffers ...;
    then jit, memory, parallelism), a server version change, and more shared
    blocks read from outside shared_buffers. Warning: PS200 carries the error.

    ## Why it matters
    effective_io_concurrency 1 -> 100 made a Bitmap Heap Scan over uncached pages
    4x faster (65.6 s -> 17.8 s) with an identical plan and cost: prefetching is
    not in the cost model. The same holds for io_method and io_combine_limit (PG
    18), the cache state, checksums and the storage. A slowdown the planner cannot
    see will not be fixed by planner settings or statistics.

    ## Example
    The same Bitmap Heap Scan, effective_io_concurrency 100 -> 1 (PG 15), timed
    on uncached data (the 4x above; the captured runs were warm):

        same plan and cost (4524.1 vs 4524.1) but 3.96x slower (95% CI
        3.89-4.09): the duration changed without any cost change; settings
        differ: effective_io_concurrency 100 -> 1

    ## What to do
    Restore or tune the named I/O setting (effective_io_concurrency in the
    hundreds for SSDs, per tablespace with ALTER TABLESPACE ... SET); compare
    shared read versus hit of the two sides (a cold cache reads), the storage
    and the host. Re-run with more samples if nothing differs.

    ## References
    - I/O settings (effective_io_concurrency, io_method):
      https://www.postgresql.org/docs/current/runtime-config-resource.html
    - EXPLAIN (ANALYZE, BUFFERS):
      https://www.postgresql.org/docs/current/sql-explain.html
    - Just-in-time compilation: https://www.postgresql.org/docs/current/jit.html
    """
    if comparison.plan_changed or comparison.timing.verdict is not Verdict.REGRESSED:
        return
    base_cost = plan_cost(comparison.baseline.dominant)
    cand_cost = plan_cost(comparison.candidate.dominant)
    gap = relative_gap(base_cost, cand_cost)
    if gap > float(options["max_cost_change"]):
        return
    hint, named = clock_hint(comparison)
    cost = "cost" if gap == 0 else f"cost within {100 * gap:.1f}%"
    message = (
        f"same plan and {cost} ({fmt_cost(base_cost)} vs {fmt_cost(cand_cost)}) but "
        f"{comparison.timing.describe()}: the duration changed without any cost change; {hint}"
    )
    evidence: dict[str, Any] = {
        "baseline_cost": base_cost,
        "candidate_cost": cand_cost,
        "cost_change": gap,
        "settings": [c.as_evidence() for c in named],
        **verdict_evidence(comparison),
    }
    yield same_plan_slower.finding(comparison, message, evidence)
