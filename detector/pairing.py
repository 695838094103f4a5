"""Pair the two sides of a comparison query by query (and sweep point), from grouped store reads."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from detector.model import Plan, PlanVariant, Side, TimingStats, parse_plan
from detector.store import PlanGroup, QueryRecord, SideSummary, Store, TargetRecord


@dataclass(frozen=True)
class SidePair:
    query_key: str
    query_name: str
    sql: str
    point: str | None
    baseline: Side
    candidate: Side

    @property
    def label(self) -> str:
        return f"{self.query_name} [{self.point}]" if self.point else self.query_name


def point_order(point: str | None) -> tuple[int, float, str]:
    """Sweep points in numeric order when they are `param=number`, else by text."""
    if point is None:
        return (0, 0.0, "")
    value = point.partition("=")[2]
    try:
        return (1, float(value), point)
    except ValueError:
        return (2, 0.0, point)


class _Plans:
    """Signature and plan per group: this target's own EXPLAIN of this query, point and shape
    (plan_examples) when stored, else the shape's first EXPLAIN (logs, older stores)."""

    def __init__(self, store: Store, target_ids: list[int]) -> None:
        self.store = store
        self.examples = store.plan_examples(target_ids)
        self.shared: dict[str, tuple[str, Plan]] = {}
        self.parsed: dict[str, Plan] = {}

    def get(self, group: PlanGroup) -> tuple[str, Plan]:
        fingerprint = group.fingerprint
        if fingerprint not in self.shared:
            record = self.store.plan_record(fingerprint)
            self.shared[fingerprint] = (record.signature, parse_plan(record.plan_json))
        signature, plan = self.shared[fingerprint]
        example = self.examples.get((group.target_id, group.query_key, group.point, fingerprint))
        if example is None:
            return signature, plan
        if example not in self.parsed:
            self.parsed[example] = parse_plan(example)
        return signature, self.parsed[example]


def _side(
    target: TargetRecord, groups: list[PlanGroup], summary: SideSummary | None, plans: _Plans
) -> Side:
    variants = []
    for group in groups:
        signature, plan = plans.get(group)
        variants.append(
            PlanVariant(
                fingerprint=group.fingerprint,
                signature=signature,
                plan=plan,
                samples=group.samples,
                median_ms=group.median_ms,
                median_cost=group.median_cost,
                median_shared_blocks=group.median_shared_blocks,
            )
        )
    if len(variants) > 1:
        variants.sort(key=lambda v: (-v.samples, v.fingerprint))
    timing = None
    if summary is not None and summary.n:
        timing = TimingStats(
            summary.n,
            summary.median_ms,
            summary.p90_ms,
            summary.p99_ms,
            summary.min_ms,
            summary.max_ms,
        )
    single = groups[0] if len(groups) == 1 else None
    return Side(
        label=target.name,
        server_version_num=target.server_version_num,
        settings=target.gucs,
        plans=tuple(variants),
        durations_ms=single.durations_ms if single else tuple(d for g in groups for d in g.durations_ms),
        timing=timing,
        planning_ms=single.planning_ms if single else tuple(p for g in groups for p in g.planning_ms),
    )


GroupsBySide = dict[tuple[str, str | None], dict[int, list[PlanGroup]]]
Summaries = Mapping[tuple[str, str | None, int], SideSummary]


def pair_sides(
    store: Store, baseline: TargetRecord, candidate: TargetRecord, *, query: str | None = None
) -> list[SidePair]:
    """Queries (and points) measured on both sides, ordered by name and numeric point."""
    ids = [baseline.target_id, candidate.target_id]
    groups: GroupsBySide = defaultdict(lambda: defaultdict(list))
    for group in store.plan_groups(ids):
        groups[(group.query_key, group.point)][group.target_id].append(group)
    summaries = {(s.query_key, s.point, s.target_id): s for s in store.side_summaries(ids)}
    return build_pairs(store, baseline, candidate, groups, summaries, query, example_targets=ids)


def build_pairs(
    store: Store,
    baseline: TargetRecord,
    candidate: TargetRecord,
    groups: GroupsBySide,
    summaries: Summaries,
    query: str | None,
    *,
    example_targets: list[int],
) -> list[SidePair]:
    """SidePairs from plan groups keyed by (query, point) then side id, for any kind of side."""
    queries: Mapping[str, QueryRecord] = store.queries()
    plans = _Plans(store, example_targets)
    pairs = []
    for (key, point), by_target in groups.items():
        record = queries.get(key)
        name = record.name if record else key
        base, cand = by_target.get(baseline.target_id), by_target.get(candidate.target_id)
        if (query and query != name) or not base or not cand:
            continue
        pairs.append(
            SidePair(
                query_key=key,
                query_name=name,
                sql=record.sql if record else "",
                point=point,
                baseline=_side(baseline, base, summaries.get((key, point, baseline.target_id)), plans),
                candidate=_side(candidate, cand, summaries.get((key, point, candidate.target_id)), plans),
            )
        )
    pairs.sort(key=lambda p: (p.query_name, point_order(p.point)))
    return pairs
