"""Two EXPLAIN documents compared without a store: the `detector.compare_plans` front door.

Used from a notebook or a test suite: give the plans (EXPLAIN (FORMAT JSON) output, as text or
parsed), optionally the durations each side measured, and get the same comparison and findings
`planshift compare` reports.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from detector.engine import stats, stats_paired
from detector.engine.comparison.compare import apply_rules
from detector.engine.comparison.options import CompareOptions
from detector.engine.comparison.verdicts import plan_only_timing
from detector.errors import PlanshiftError
from detector.model import (
    ComparisonResult,
    Plan,
    PlanVariant,
    QueryComparison,
    Side,
    fingerprint,
    parse_plan,
    signature,
)


def side_of(
    label: str,
    plans: Sequence[Any] | Any,
    durations_ms: Sequence[float] = (),
    *,
    samples: Sequence[int] | None = None,
    settings: Mapping[str, str] | None = None,
    server_version_num: int | None = None,
    calls: int | None = None,
    planning_ms: Sequence[float] = (),
) -> Side:
    """One side from its plan(s): an EXPLAIN JSON document (text or parsed), or several with
    `samples` saying how many executions used each (default: all durations on every plan)."""
    documents = list(plans) if isinstance(plans, list | tuple) else [plans]
    if not documents:
        raise PlanshiftError(f"{label}: no plan given", "pass an EXPLAIN (FORMAT JSON) document")
    counts = list(samples) if samples is not None else [len(durations_ms) or 1] * len(documents)
    if len(counts) != len(documents):
        raise PlanshiftError(f"{label}: {len(documents)} plans but {len(counts)} sample counts")
    durations = tuple(float(d) for d in durations_ms)
    variants = []
    for document, count in zip(documents, counts, strict=True):
        plan = _parsed(label, document)
        median = statistics.median(durations) if durations and len(documents) == 1 else None
        shared = float(plan.buffers_total().shared_total)
        variants.append(
            PlanVariant(
                fingerprint(plan), signature(plan), plan, count, median, plan.total_cost, shared
            )
        )
    variants.sort(key=lambda v: (-v.samples, v.fingerprint))
    return Side(
        label=label,
        server_version_num=server_version_num,
        settings={str(k): str(v) for k, v in (settings or {}).items()},
        plans=tuple(variants),
        durations_ms=durations,
        timing=stats.timing_stats(durations) if durations else None,
        calls=calls,
        planning_ms=tuple(float(p) for p in planning_ms),
    )


def compare_plans(
    before: Any,
    after: Any,
    *,
    before_ms: Sequence[float] = (),
    after_ms: Sequence[float] = (),
    paired: bool = False,
    sql: str = "",
    name: str = "query",
    before_settings: Mapping[str, str] | None = None,
    after_settings: Mapping[str, str] | None = None,
    options: CompareOptions | None = None,
) -> ComparisonResult:
    """Compare a query's plan before and after a change, and its timings when given.

    `before` / `after`: EXPLAIN (FORMAT JSON[, ANALYZE, BUFFERS, SETTINGS]) output, as text or
    parsed. `before_ms` / `after_ms`: measured durations; `paired=True` when sample i of both
    sides ran back to back with the same parameters (then the lists must be equally long).
    """
    chosen = options or CompareOptions()
    baseline = side_of("before", before, before_ms, settings=before_settings)
    candidate = side_of("after", after, after_ms, settings=after_settings)
    if before_ms and after_ms:
        if paired and len(before_ms) != len(after_ms):
            raise PlanshiftError(
                f"paired timings need equal counts (before {len(before_ms)}, after {len(after_ms)})",
                "pass paired=False for two independent samples",
            )
        judge = stats_paired.compare_paired if paired else stats.compare_timings
        timing = judge(
            baseline.durations_ms,
            candidate.durations_ms,
            min_effect=chosen.min_effect,
            alpha=chosen.alpha,
            min_samples=chosen.min_samples,
        )
    else:
        timing = plan_only_timing(chosen.min_effect, "plan-only: no timings given")
    comparison = QueryComparison(name, name, sql, baseline, candidate, timing)
    return ComparisonResult(
        baseline="before",
        candidate="after",
        run_ids=(),
        queries=(comparison,),
        findings=tuple(apply_rules([comparison], chosen)),
        interleaved=paired,
        alpha=chosen.alpha,
    )


def _parsed(label: str, document: Any) -> Plan:
    """The plan of an EXPLAIN JSON document; text keeps its source (what reports offer)."""
    try:
        return parse_plan(document)
    except PlanshiftError as exc:
        raise PlanshiftError(
            f"{label}: not an EXPLAIN JSON document ({exc.message})",
            "use EXPLAIN (FORMAT JSON) output; text plans go through `planshift ingest`",
        ) from None
