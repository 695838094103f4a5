"""Pair the two sides of a comparison query by query (and sweep point), from grouped store reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from operator import attrgetter, itemgetter
from typing import NamedTuple

from detector.engine.comparison.bulk_sides import BulkSides
from detector.engine.comparison.bulk_sides import (
    side_settings_of as side_settings_of,  # its former home
)
from detector.model import Plan, Side, parse_plan
from detector.model.host import HostConditions
from detector.store import Store, TargetRecord
from detector.store.grouped import Window


class SidePair(NamedTuple):  # a tuple: 100,000 of them are built per large comparison
    query_key: str
    query_name: str
    sql: str
    point: str | None
    baseline: Side
    candidate: Side

    @property
    def label(self) -> str:
        return f"{self.query_name} [{self.point}]" if self.point else self.query_name


# SidePair(*fields) without the Python-level __new__ of a NamedTuple (half the time)
_new_pair = partial(tuple.__new__, SidePair)
_FIRST, _SECOND = itemgetter(0), itemgetter(1)


def point_order(point: str | None) -> tuple[int, float, str]:
    """Sweep points in numeric order when they are `param=number`, else by text."""
    if point is None:
        return (0, 0.0, "")
    value = point.partition("=")[2]
    try:
        return (1, float(value), point)
    except ValueError:
        return (2, 0.0, point)


def sort_pairs(pairs: list[SidePair]) -> None:
    """By query name, then sweep point in numeric order."""
    if any(p.point is not None for p in pairs):
        pairs.sort(key=lambda p: (p.query_name, point_order(p.point)))
    else:  # the same order: every point's key is the same
        pairs.sort(key=attrgetter("query_name"))


class Plans:
    """Signature and plan per group: this target's own EXPLAIN of this query, point and shape
    (plan_examples) when stored, else the shape's first EXPLAIN (logs, older stores)."""

    def __init__(self, store: Store, target_ids: list[int]) -> None:
        self.store = store
        self.examples = store.plan_examples(target_ids)
        self.shared: dict[str, tuple[str, Plan]] = {}
        self.parsed: dict[str, Plan] = {}

    def get(
        self, target_id: int, query_key: str, point: str | None, fingerprint: str
    ) -> tuple[str, Plan]:
        if fingerprint not in self.shared:
            record = self.store.plan_record(fingerprint)
            self.shared[fingerprint] = (record.signature, parse_plan(record.plan_json))
        signature, plan = self.shared[fingerprint]
        example = (
            self.examples.get((target_id, query_key, point, fingerprint)) if self.examples else None
        )
        if example is None:
            return signature, plan
        if example not in self.parsed:
            self.parsed[example] = parse_plan(example)
        return signature, self.parsed[example]

    def many(
        self,
        target_ids: list[int],
        query_keys: list[str],
        points: list[str | None],
        fingerprints: list[str],
    ) -> tuple[list[str], list[Plan]]:
        """(signatures, plans) of many groups: `get` for each, once per shape for the groups
        of queries without examples."""
        shapes = {f: self.get(0, "", None, f) for f in dict.fromkeys(fingerprints)}
        signatures = list(map({f: s for f, (s, _) in shapes.items()}.__getitem__, fingerprints))
        plans = list(map({f: p for f, (_, p) in shapes.items()}.__getitem__, fingerprints))
        exemplified = {query_key for _, query_key, _, _ in self.examples}
        if not exemplified:  # no pass over the groups (2 million of them)
            return signatures, plans
        for i in [i for i, key in enumerate(query_keys) if key in exemplified]:
            signatures[i], plans[i] = self.get(
                target_ids[i], query_keys[i], points[i], fingerprints[i]
            )
        return signatures, plans


def pair_sides(
    store: Store,
    baseline: TargetRecord,
    candidate: TargetRecord,
    *,
    query: str | None = None,
    windows: Sequence[Window] = (),
    hosts: Mapping[int, HostConditions] | None = None,
) -> list[SidePair]:
    """Queries (and points) measured on both sides, ordered by name and numeric point. Sides
    are two targets, or two time windows of logged executions (`windows`, under their ids);
    `hosts`: each target's host conditions by target id."""
    ids = [w.side_id for w in windows] if windows else [baseline.target_id, candidate.target_id]
    texts: dict[str, tuple[str, str]] | None = None
    keys: list[str] | None = None
    if query is not None:  # else the texts are read after the build's peak
        texts = store.query_texts()
        keys = [query, *(k for k, (n, _) in texts.items() if n == query)]
    index = BulkSides(store.grouped_samples(ids, keys, windows))
    # log observations keep no per-target plan examples: each shape's first EXPLAIN is used
    plans = Plans(store, [] if windows else ids)
    sides = index.build({ids[0]: baseline, ids[1]: candidate}, plans, hosts)
    texts = store.query_texts() if texts is None else texts
    g = index.grouped
    firsts, bases, cands = index.pairs(ids[0], ids[1])
    keys = list(map(g.query_keys.__getitem__, firsts))
    try:
        named = list(map(texts.__getitem__, keys))
    except KeyError:  # a query without its row in `queries`: named by its key
        named = [texts.get(key) or (key, "") for key in keys]
    pairs = list(
        map(
            _new_pair,
            zip(
                keys,
                map(_FIRST, named),
                map(_SECOND, named),
                map(g.points.__getitem__, firsts),
                map(sides.__getitem__, bases),
                map(sides.__getitem__, cands),
                strict=True,
            ),
        )
    )
    if query:
        pairs = [pair for pair in pairs if pair.query_name == query]
    sort_pairs(pairs)
    return pairs
