"""PS200-PS202 timing: the measured verdict itself (the CI of the median ratio, minimum effect).

PS200 timing-regression, PS201 timing-improvement, PS202 same-plan-slower: one message and
one account of what moves the clock without moving the cost, shared by the three.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, Severity, Verdict
from rules.base import rule
from rules.common import emit, fmt_cost, percentiles_text, plan_cost, relative_gap, timing_evidence
from rules.gucs import SettingChange, changes_text, settings_changes, version_change


def _timing_message(comparison: QueryComparison) -> str:
    parts = [comparison.timing.describe()]
    spread = percentiles_text(comparison.baseline.timing, comparison.candidate.timing)
    if spread:
        parts.append(spread)
    plan = "plan changed (see PS100)" if comparison.plan_changed else "same plan"
    return ", ".join(parts) + f"; {plan}"


def _median_delta_ms(comparison: QueryComparison) -> float | None:
    base, cand = comparison.baseline.timing, comparison.candidate.timing
    if base is None or cand is None:
        return None
    return cand.median_ms - base.median_ms


def _evidence(comparison: QueryComparison) -> dict[str, Any]:
    return {
        **timing_evidence(comparison),
        "median_delta_ms": _median_delta_ms(comparison),
        "plan_changed": comparison.plan_changed,
    }


@rule(
    "PS200",
    "timing-regression",
    "timing",
    Severity.ERROR,
    gate=lambda c, _: c.timing.verdict is Verdict.REGRESSED,
    min_delta_ms=0.0,
)
def timing_regression(comparison: QueryComparison, options: Mapping[str, Any]) -> Iterator[Finding]:
    """The candidate is measured slower: the timing verdict is `regressed`.

    ## What it flags
    A query whose timing comparison says `regressed` (README "How it
    decides"): the 95% confidence interval of the effect lies above 1
    (interleaved sides: the biweight t interval of the per-sample ratios;
    other sides: a bootstrap of the ratio of medians), the effect exceeds the
    minimum (default 10%) and the A/A noise floor, and the q-value across the
    comparison's queries is below 5%. Always an error. Too few samples or an
    overlapping interval is `inconclusive` and never fires. With `min_delta_ms`
    (default 0.0) a regression whose median grows by less than that many
    milliseconds is skipped (sub-millisecond queries in a CI gate).

    ## Why it matters
    This is the number the users feel. It is reported from the distributions
    (median, p90, CI), never from a lone mean: a few slow outliers move a mean
    and hide how the bulk of the executions behave. The message says whether
    the plan changed too: a slowdown with the same plan points at settings, I/O
    or the executor (effective_io_concurrency can change a bitmap scan's
    duration 4x while its cost stays the same), not the planner.

    ## Example
    sysbench simple_range (8000 rows), PG 10 -> PG 17:

        1.23x slower (95% CI 1.15-1.31), median 2.10 ms -> 2.60 ms,
        p90 2.40 ms -> 3.10 ms; plan changed (see PS100)

    ## What to do
    If the plan changed, start from the plan-flip findings. If not, compare the
    settings and the buffers (shared read versus hit) of both sides, and rerun
    with more samples if the interval is wide.

    ## References
    - EXPLAIN ANALYZE and its caveats:
      https://www.postgresql.org/docs/current/using-explain.html
    - pg_stat_statements:
      https://www.postgresql.org/docs/current/pgstatstatements.html
    """
    if comparison.timing.verdict is not Verdict.REGRESSED:
        return
    delta = _median_delta_ms(comparison)
    if delta is not None and delta < float(options["min_delta_ms"]):
        return
    yield emit("PS200", comparison, _timing_message(comparison), _evidence(comparison))


@rule(
    "PS201",
    "timing-improvement",
    "timing",
    Severity.INFO,
    gate=lambda c, _: c.timing.verdict is Verdict.IMPROVED,
)
def timing_improvement(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """The candidate is measured faster: the timing verdict is `improved`.

    ## What it flags
    A query whose timing comparison says `improved`: the confidence interval of
    the median ratio lies below 1 and the effect exceeds the minimum and the noise
    floor. Always info; it never fails a CI gate. With the same plan at the same
    cost it names what moved the clock as PS202 does (the differing I/O, JIT,
    memory and parallelism settings, the version, more blocks read, I/O time).

    ## Why it matters
    An upgrade or a settings change is judged by its wins as well as its losses,
    and an improvement that comes with a plan flip shows which plan the candidate
    should keep.

    ## Example
    `effective_io_concurrency` 1 -> 100, a Bitmap Heap Scan over uncached pages:

        3.68x faster (95% CI 0.26-0.29), median 65604 ms -> 17807 ms,
        p90 66010 ms -> 18120 ms; same plan

    ## What to do
    Nothing is required. Keep the change; if it came with a plan flip, note the
    plan so a later flip back is recognised as a regression.

    ## References
    - EXPLAIN ANALYZE and its caveats:
      https://www.postgresql.org/docs/current/using-explain.html
    - I/O settings (effective_io_concurrency, io_method):
      https://www.postgresql.org/docs/current/runtime-config-resource.html
    """
    if comparison.timing.verdict is not Verdict.IMPROVED:
        return
    message, evidence = _timing_message(comparison), _evidence(comparison)
    base_cost = plan_cost(comparison.baseline.dominant)
    cand_cost = plan_cost(comparison.candidate.dominant)
    if not comparison.plan_changed and relative_gap(base_cost, cand_cost) <= SAME_COST:
        hint, named = _io_hint(comparison)
        message += f" and cost ({fmt_cost(base_cost)} vs {fmt_cost(cand_cost)}); {hint}"
        evidence["settings"] = [c.as_evidence() for c in named]
    yield emit("PS201", comparison, message, evidence)


SAME_COST = 0.05  # PS201 names clock-only settings when the costs are this close


def _io_hint(comparison: QueryComparison) -> tuple[str, list[SettingChange]]:
    """The differing settings that move the clock without the cost, I/O first."""
    changes = settings_changes(comparison.baseline, comparison.candidate)
    io = [c for c in changes if c.category == "i/o"]
    clock = [c for c in changes if c.category in ("jit", "memory", "parallelism")]
    named = io + clock
    version = version_change(comparison.baseline, comparison.candidate)
    parts: list[str] = []
    if named:
        parts.append("settings differ: " + changes_text(named))
    if version:
        parts.append(version)
    base_read = comparison.baseline.dominant.plan.buffers_total().shared_read
    cand_read = comparison.candidate.dominant.plan.buffers_total().shared_read
    if cand_read > base_read:
        parts.append(
            f"shared read {base_read} -> {cand_read} blocks in the example executions "
            "(a colder cache?)"
        )
    base_io = comparison.baseline.dominant.plan.buffers_total().io_read_ms
    cand_io = comparison.candidate.dominant.plan.buffers_total().io_read_ms
    if base_io and cand_io and relative_gap(base_io, cand_io) >= 0.2:
        parts.append(f"I/O read time {base_io:.3g} -> {cand_io:.3g} ms in the example executions")
    busy = [side for side in (comparison.baseline, comparison.candidate) if side.host and side.host.busy]
    if len(busy) == 1:  # one side measured on a busy host, the other not (two runs)
        reasons = "; ".join(r.text for r in busy[0].host.busy_reasons()) if busy[0].host else ""
        parts.append(f"{busy[0].label}'s host was busy ({reasons}) and the other side's not")
    if not parts:
        parts.append(
            "no recorded setting differs: compare the cache state, the storage and the host"
        )
    return "; ".join(parts), named


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
    hint, named = _io_hint(comparison)
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
        **_evidence(comparison),
    }
    yield emit("PS202", comparison, message, evidence)
