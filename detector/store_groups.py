"""Grouped reads for comparisons: DuckDB aggregates, Python gets one row per plan shape.

A comparison of 100,000 queries x 2 targets x 10 samples reads 2 million observations;
building a Python object per observation costs seconds, so the grouping, the medians and
the percentiles happen in DuckDB (quantile_cont = linear interpolation, as numpy's default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from detector.store_reads import StoreBase


@dataclass(frozen=True)
class PlanGroup:
    """The executions of one query (and sweep point) on one target that used one plan shape."""

    query_key: str
    point: str | None
    target_id: int
    fingerprint: str
    samples: int
    durations_ms: tuple[float, ...]
    planning_ms: tuple[float, ...]
    median_ms: float | None
    median_cost: float
    median_shared_blocks: float


@dataclass(frozen=True)
class SideSummary:
    """Timing distribution of one query (and point) on one target, over all plan shapes."""

    query_key: str
    point: str | None
    target_id: int
    n: int
    median_ms: float
    p90_ms: float
    p99_ms: float
    min_ms: float
    max_ms: float


_GROUPS = """
SELECT query_key, point, target_id, fingerprint, count(*),
       coalesce(list(duration_ms ORDER BY sample_index) FILTER (WHERE duration_ms IS NOT NULL), []),
       coalesce(list(planning_ms ORDER BY sample_index) FILTER (WHERE planning_ms IS NOT NULL), []),
       median(duration_ms), median(total_cost),
       median(coalesce(shared_hit, 0) + coalesce(shared_read, 0))
FROM observations
WHERE target_id IN (SELECT unnest($1::BIGINT[]))
GROUP BY query_key, point, target_id, fingerprint
"""

_SUMMARIES = """
SELECT query_key, point, target_id, count(duration_ms), median(duration_ms),
       quantile_cont(duration_ms, 0.9), quantile_cont(duration_ms, 0.99),
       min(duration_ms), max(duration_ms)
FROM observations
WHERE target_id IN (SELECT unnest($1::BIGINT[])) AND duration_ms IS NOT NULL
GROUP BY query_key, point, target_id
"""


class StoreGroupsMixin(StoreBase):
    def plan_groups(self, target_ids: Sequence[int]) -> list[PlanGroup]:
        rows = self._con.execute(_GROUPS, [list(target_ids)]).fetchall()
        return [
            PlanGroup(
                key, point, target, fp, samples, tuple(durations), tuple(planning),
                median_ms, float(cost), float(blocks),
            )
            for key, point, target, fp, samples, durations, planning, median_ms, cost, blocks in rows
        ]

    def plan_examples(self, target_ids: Sequence[int]) -> dict[tuple[int, str, str | None, str], str]:
        """EXPLAIN JSON per (target, query, point, fingerprint), where the store has one."""
        rows = self._con.execute(
            "SELECT target_id, query_key, point, fingerprint, plan_json FROM plan_examples "
            "WHERE target_id IN (SELECT unnest($1::BIGINT[]))",
            [list(target_ids)],
        ).fetchall()
        return {(t, q, p, f): plan_json for t, q, p, f, plan_json in rows}

    def side_summaries(self, target_ids: Sequence[int]) -> list[SideSummary]:
        rows = self._con.execute(_SUMMARIES, [list(target_ids)]).fetchall()
        return [SideSummary(*row) for row in rows]
