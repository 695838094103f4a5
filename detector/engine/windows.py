"""Time windows of ingested logs as compare sides: `before..14:05` against `14:05..after`."""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from detector.engine.pairing import Plans, SidePair, make_side, sort_pairs
from detector.engine.stats import timing_stats
from detector.errors import PlanshiftError
from detector.model import PlanVariant, Side
from detector.store import PlanGroup, QueryRecord, Store, TargetRecord

GroupsBySide = dict[tuple[str, str | None], dict[int, list[PlanGroup]]]


def is_window(spec: str) -> bool:
    """`[SOURCE@]SINCE..UNTIL` (either end may be empty) names a time window of logged plans."""
    return ".." in spec


def window_side(store: Store, spec: str) -> TargetRecord:
    """A made-up target for a time window of log observations: `13:00..14:05`,
    `prod@2026-11-22T14:05..` (times UTC; a time of day is on the day of the latest log)."""
    from detector.engine.timeline import parse_time

    source, _, window = spec.rpartition("@") if "@" in spec.split("..")[0] else ("", "", spec)
    since_text, _, until_text = window.partition("..")
    latest = store.log_observations()
    if not latest:
        raise PlanshiftError(
            f"{spec!r} is a time window, but the store has no logged plans",
            "ingest auto_explain logs with `planshift ingest` first",
        )
    reference = latest[-1].row.collected_at
    since = parse_time(since_text, reference) if since_text.strip() else None
    until = parse_time(until_text, reference) if until_text.strip() else None
    if since is not None and until is not None and since >= until:
        raise PlanshiftError(f"empty time window {spec!r}", "write SINCE..UNTIL, SINCE first")
    info = {
        "window": [since.isoformat() if since else None, until.isoformat() if until else None],
        "source": source or None,
    }
    side_id = -1 - zlib.crc32(spec.encode())
    run_id = max(row.row.run_id for row in latest[-1:])
    return TargetRecord(side_id, run_id, spec, "log", None, {}, info)


def window_pairs(
    store: Store, baseline: TargetRecord, candidate: TargetRecord, query: str | None
) -> list[SidePair]:
    """pair_sides for time windows: the same pairing, from window-grouped log observations."""
    from detector.engine.timeline import parse_time

    groups: GroupsBySide = {}
    for side in (baseline, candidate):
        since, until = (parse_time(t) if t else None for t in side.info["window"])
        for group in store.window_groups(since, until, side.info["source"], side.target_id):
            by_side = groups.setdefault((group.query_key, group.point), {})
            by_side.setdefault(side.target_id, []).append(group)
    return build_pairs(store, baseline, candidate, groups, query)


def build_pairs(
    store: Store,
    baseline: TargetRecord,
    candidate: TargetRecord,
    groups: GroupsBySide,
    query: str | None,
) -> list[SidePair]:
    """SidePairs from plan groups keyed by (query, point) then side id."""
    queries: Mapping[str, QueryRecord] = store.queries()
    # log observations keep no per-target plan examples: each shape's first EXPLAIN is used
    plans = Plans(store, [])
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
                baseline=_side(baseline, base, plans),
                candidate=_side(candidate, cand, plans),
            )
        )
    sort_pairs(pairs)
    return pairs


def _side(target: TargetRecord, groups: list[PlanGroup], plans: Plans) -> Side:
    variants = []
    for group in groups:
        signature, plan = plans.get(
            group.target_id, group.query_key, group.point, group.fingerprint
        )
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
    durations = tuple(d for g in groups for d in g.durations_ms)
    return make_side(
        target,
        variants,
        durations,
        timing_stats(durations) if durations else None,  # as a run's side: numpy's quantiles
        tuple(p for g in groups for p in g.planning_ms),
    )
