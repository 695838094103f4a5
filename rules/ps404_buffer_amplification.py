"""PS404 buffer-amplification: the candidate touches many times the buffers per execution."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from detector.model import Finding, PlanVariant, QueryComparison, Severity
from detector.model.units import fmt_count, fmt_ratio
from rules.base import rule
from rules.common import timing_evidence
from rules.matching import facts


def shared_blocks(variant: PlanVariant) -> float | None:
    """Shared buffers (hit + read) per execution: the observations' median, else the plan's."""
    if variant.median_shared_blocks is not None:
        return variant.median_shared_blocks
    if not variant.plan.analyzed:
        return None
    return float(facts(variant.plan).shared_blocks)


def temp_blocks(variant: PlanVariant) -> float | None:
    if not variant.plan.analyzed:
        return None
    return float(facts(variant.plan).temp_blocks)


def _amplified(before: float | None, after: float | None, ratio: float, min_blocks: float) -> bool:
    return (
        before is not None
        and after is not None
        and after - before >= min_blocks
        and after >= ratio * before
    )


def _may_amplify(comparisons: Sequence[QueryComparison], options: Mapping[str, Any]) -> list[bool]:
    """The check's first test, for every comparison at once (temp blocks once per plan pair)."""
    ratio, min_blocks = float(options["ratio"]), float(options["min_blocks"])
    temp: dict[tuple[int, int], bool] = {}
    out = []
    for comparison in comparisons:
        base, cand = comparison.baseline.plans[0], comparison.candidate.plans[0]
        if _amplified(shared_blocks(base), shared_blocks(cand), ratio, min_blocks):
            out.append(True)
            continue
        key = (id(base.plan), id(cand.plan))  # the plans live as long as `comparisons`
        if key not in temp:
            temp[key] = _amplified(temp_blocks(base), temp_blocks(cand), ratio, min_blocks)
        out.append(temp[key])
    return out


@rule(
    "PS404",
    "buffer-amplification",
    "resources",
    Severity.WARNING,
    ratio=2.0,
    min_blocks=100,
    each=_may_amplify,
)
def buffer_amplification(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """The candidate touches many times the buffers (shared or temp) per execution.

    ## What it flags
    Shared buffers per execution (hit + read; the median over the observations
    of the dominant plan, else its EXPLAIN (BUFFERS) totals) or temp blocks
    (read + written) of the candidate at least `ratio` (default 2.0) times the
    baseline's and at least `min_blocks` (default 100) more. Plan change or not.
    Warning: buffers predict what the clock on a warm benchmark may not show.

    ## Why it matters
    Buffers are the work a plan does, independent of how warm the cache was when
    it was timed. An index-only and a plain index scan of one range measured close
    on a warm cache and 5.4x apart on a cold one, because one touched far more
    heap pages. Every extra shared buffer is a potential disk read once the data
    outgrows memory, and every temp block is real I/O now.

    ## Example
    The sysbench range, Index Scan -> Seq Scan (PG 15):

        shared buffers per execution 861 -> 7032 (8.17x)

    ## What to do
    Find the node that reads more (EXPLAIN (ANALYZE, BUFFERS) on both sides; the
    plan-flip findings point at it). Time the query with a cold cache before
    accepting the change; for temp blocks see PS401/PS402.

    ## References
    - EXPLAIN (ANALYZE, BUFFERS):
      https://www.postgresql.org/docs/current/sql-explain.html
    - Using EXPLAIN: https://www.postgresql.org/docs/current/using-explain.html
    - pg_stat_statements:
      https://www.postgresql.org/docs/current/pgstatstatements.html
    """
    ratio, min_blocks = float(options["ratio"]), float(options["min_blocks"])
    base, cand = comparison.baseline.dominant, comparison.candidate.dominant
    shared = (shared_blocks(base), shared_blocks(cand))
    temp = (temp_blocks(base), temp_blocks(cand))
    if not (_amplified(*shared, ratio, min_blocks) or _amplified(*temp, ratio, min_blocks)):
        return
    parts: list[str] = []
    evidence: dict[str, Any] = {"ratio_threshold": ratio}
    for what, (before, after) in (("shared buffers", shared), ("temp blocks", temp)):
        evidence[f"baseline_{what.replace(' ', '_')}"] = before
        evidence[f"candidate_{what.replace(' ', '_')}"] = after
        if before is None or after is None or not _amplified(before, after, ratio, min_blocks):
            continue
        text = f"{what} per execution {fmt_count(round(before))} -> {fmt_count(round(after))}"
        if before > 0:
            text += f" ({fmt_ratio(after / before)}x)"
        parts.append(text)
    if not parts:
        return
    evidence["plan_changed"] = comparison.plan_changed
    yield buffer_amplification.finding(
        comparison, "; ".join(parts), {**evidence, **timing_evidence(comparison)}
    )
