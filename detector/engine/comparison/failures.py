"""Failed executions in a comparison: attached to the queries that were compared, and the
queries that could not be compared because no execution of them worked on a side.

The runner records every execution PostgreSQL refused (table query_failures). A query that
failed on some samples only is compared as usual on the samples that worked on both sides,
with its failures attached (`QueryComparison.failures`); one that never worked on a side has
nothing to compare and goes to `ComparisonResult.failed`, with the plans and timings of the side
where it worked. Rule PS700 reads both. The timing statistics, and the false discovery control
across queries, count only the compared ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from detector.engine.comparison.bulk_sides import BulkSides, production_calls, side_settings_of
from detector.engine.comparison.options import CompareOptions
from detector.engine.comparison.query_pairs import Plans, point_order
from detector.engine.comparison.windows import WindowSide
from detector.model import QueryComparison, Side, TimingComparison, Verdict
from detector.model.failures import Failures, QueryFailure
from detector.store import Store, TargetRecord

Key = tuple[str, str | None]  # query key, sweep point


def with_failures(
    store: Store,
    baseline: TargetRecord,
    candidate: TargetRecord,
    comparisons: Sequence[QueryComparison],
    options: CompareOptions,
) -> tuple[list[QueryComparison], list[QueryComparison]]:
    """(the compared queries, those with failures carrying them; the queries not compared
    because they failed on a side, by name and sweep point)."""
    if isinstance(baseline, WindowSide) or isinstance(candidate, WindowSide):
        return list(comparisons), []
    found = store.query_failures([baseline.target_id, candidate.target_id])
    if not found:
        return list(comparisons), []
    texts = store.query_texts()
    grouped = _grouped(found, baseline.target_id)
    if options.query is not None:
        grouped = {
            key: failures
            for key, failures in grouped.items()
            if texts.get(key[0], (key[0], ""))[0] == options.query or key[0] == options.query
        }
    compared = list(comparisons)
    position = {(c.query_key, c.point): i for i, c in enumerate(compared)}
    for key, failures in grouped.items():
        if key in position:
            i = position[key]
            compared[i] = replace(compared[i], failures=failures)
    lonely = [key for key in grouped if key not in position]
    if not lonely:
        return compared, []
    keys = sorted({query_key for query_key, _ in lonely})
    base_sides = _sides_of(store, baseline, keys)
    cand_sides = _sides_of(store, candidate, keys)
    not_compared = TimingComparison(
        Verdict.INCONCLUSIVE,
        None,
        None,
        None,
        None,
        options.min_effect,
        None,
        "not compared: no execution of it worked on a side",
    )
    failed = []
    for key in lonely:
        name, sql = texts.get(key[0], (key[0], ""))
        failed.append(
            QueryComparison(
                query_key=key[0],
                query_name=name,
                sql=sql,
                baseline=base_sides.get(key) or _empty_side(baseline, key[0]),
                candidate=cand_sides.get(key) or _empty_side(candidate, key[0]),
                timing=not_compared,
                point=key[1],
                failures=grouped[key],
            )
        )
    failed.sort(key=lambda c: (c.query_name, point_order(c.point)))
    return compared, failed


def _grouped(found: Sequence[QueryFailure], baseline_id: int) -> dict[Key, Failures]:
    """Each query's (and point's) failures, per side, in the order they happened."""
    sides: dict[Key, tuple[list[QueryFailure], list[QueryFailure]]] = {}
    for failure in found:
        base, cand = sides.setdefault((failure.query_key, failure.point), ([], []))
        (base if failure.target_id == baseline_id else cand).append(failure)
    return {key: Failures(tuple(base), tuple(cand)) for key, (base, cand) in sides.items()}


def _sides_of(store: Store, target: TargetRecord, keys: list[str]) -> dict[Key, Side]:
    """The sides these queries (all their points) have on this target, where they worked."""
    ids = [target.target_id]
    grouped = store.grouped_samples(ids, keys)
    if not len(grouped.sizes):
        return {}
    index = BulkSides(grouped)
    sides = index.build({target.target_id: target}, Plans(store, ids))
    g = index.grouped
    return {
        (g.query_keys[first], g.points[first]): side
        for first, side in zip(index.first_groups, sides, strict=True)
    }


def _empty_side(target: TargetRecord, query_key: str) -> Side:
    """A side where the query never worked: no plan, no timing."""
    return Side(
        label=target.name,
        server_version_num=target.server_version_num,
        settings=side_settings_of(target),
        plans=(),
        durations_ms=(),
        timing=None,
        calls=production_calls(target, query_key),
        tables=target.info.get("tables") or {},
    )
