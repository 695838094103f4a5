"""Grouped reads for comparisons: DuckDB groups and sorts, numpy gets the numbers in bulk.

A comparison of 100,000 queries x 2 targets x 10 samples reads 2 million observations;
building a Python object per observation costs seconds, so `grouped_samples` hands over the
group keys (one row per plan shape) and the observations' numbers as numpy columns in group
order. Time windows of logged executions are sides too (`Window`): the same groups, the rows
selected by time and log source instead of by target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from operator import ne
from typing import Any

import numpy as np
import numpy.typing as npt

from detector.model.samples import rows_at, window_medians
from detector.store.core import StoreBase

Ints = npt.NDArray[np.int64]


_OBSERVATIONS = """
FROM observations
WHERE target_id IN (SELECT unnest($1::BIGINT[]))
  AND ($2::VARCHAR[] IS NULL OR query_key IN (SELECT unnest($2::VARCHAR[])))
"""
# time windows of logged executions as sides: each window's rows under its made-up side id
# ($1), between its bounds ($3, $4: NULL is open), of its log source ($5: NULL is any)
_WINDOW_OBSERVATIONS = """
FROM (
    SELECT o.* REPLACE (w.side_id AS target_id)
    FROM observations o JOIN targets t USING (target_id)
    JOIN (SELECT unnest($1::BIGINT[]) AS side_id, unnest($3::TIMESTAMP[]) AS since,
                 unnest($4::TIMESTAMP[]) AS until, unnest($5::VARCHAR[]) AS source) w
      ON (w.since IS NULL OR o.collected_at >= w.since)
     AND (w.until IS NULL OR o.collected_at < w.until)
     AND (w.source IS NULL OR t.name = w.source)
    WHERE t.source = 'log'
)
WHERE ($2::VARCHAR[] IS NULL OR query_key IN (SELECT unnest($2::VARCHAR[])))
"""

_KEY = "query_key, point, target_id, fingerprint"
_NUMBERS = (  # the blocks of each execution, for each group's median
    "duration_ms, planning_ms, total_cost, sample_index, "
    "coalesce(shared_hit, 0) + coalesce(shared_read, 0) AS shared_blocks"
)
ROWS_PER_READ = 2_000_000  # rows DuckDB sorts at once: the memory it holds after a read


def _queries(source: str, parameters: int) -> tuple[str, str, str]:
    """The group keys, the samples in key order, and the samples by key hash of the query
    keys in [lo, hi) (the two parameters after the first `parameters`; NULL is open), from
    `source` (which ends in a WHERE clause)."""
    lo, hi = f"${parameters + 1}::VARCHAR", f"${parameters + 2}::VARCHAR"
    groups = f"""
SELECT {_KEY}, count(*), hash({_KEY})
{source}
GROUP BY {_KEY}
ORDER BY {_KEY}
"""
    samples = f"SELECT {_NUMBERS} {source} ORDER BY {_KEY}, sample_index"
    hashed = f"""
SELECT {_NUMBERS}, hash({_KEY}) AS key_hash
{source}  AND ({lo} IS NULL OR query_key >= {lo}) AND ({hi} IS NULL OR query_key < {hi})
ORDER BY key_hash, sample_index
"""
    return groups, samples, hashed


_OF_TARGETS = _queries(_OBSERVATIONS, 2)
_OF_WINDOWS = _queries(_WINDOW_OBSERVATIONS, 5)


@dataclass(frozen=True)
class Window:
    """A time window of logged executions as a compare side, under a made-up side id."""

    side_id: int
    since: Any  # naive UTC datetime or None (open)
    until: Any
    source: str | None


@dataclass(frozen=True)
class GroupedSamples:
    """Plan groups (query, point, target, fingerprint) in key order, and every observation's
    numbers in the same order, by sample_index within a group: group g holds the `sizes[g]`
    rows after those of the groups before it. NaN stands for NULL where `*_known` is False.
    `query_numbers` counts the distinct (query, point) from 0, in the same order."""

    query_keys: list[str]
    points: list[str | None]
    target_ids: list[int]
    fingerprints: list[str]
    median_shared_blocks: npt.NDArray[np.float64]  # per group: shared hit + read
    sizes: npt.NDArray[np.int64]
    query_numbers: npt.NDArray[np.int64]
    durations_ms: npt.NDArray[np.float64]
    duration_known: npt.NDArray[np.bool_]
    planning_ms: npt.NDArray[np.float64]
    planning_known: npt.NDArray[np.bool_]
    total_cost: npt.NDArray[np.float64]
    sample_indices: npt.NDArray[np.signedinteger[Any]]  # as stored: INTEGER is int32


def _changes(values: list[Any]) -> npt.NDArray[np.bool_]:
    """Per group after the first: whether its value differs from the group's before."""
    return np.fromiter(map(ne, values[1:], values[:-1]), np.bool_, max(len(values) - 1, 0))


def _query_numbers(changes: npt.NDArray[np.bool_], count: int) -> Ints:
    """The distinct (query key, point) counted from 0 over `count` groups, from where either
    changes (DuckDB's dense_rank over the groups sorts them once more)."""
    return np.concatenate(([0], np.cumsum(changes, dtype=np.int64)))[:count]


def _column(values: Any) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """A fetched DOUBLE column as (values with NaN for NULL, known mask)."""
    known = ~np.ma.getmaskarray(values)
    return np.asarray(np.ma.getdata(values), np.float64), np.asarray(known, np.bool_)


def _starts(sizes: Ints) -> Ints:
    return np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)


def _group_order(
    group_hashes: npt.NDArray[np.uint64], sizes: Ints, row_hashes: npt.NDArray[np.uint64]
) -> Ints | None:
    """Where each group (in key order) starts among the rows sorted by (hash of the group key,
    sample index): each group is a block of rows, DuckDB sorts two numbers faster than the
    key's strings and numpy moves the blocks. None when two groups share a hash (then DuckDB
    sorts the keys)."""
    by_hash = np.argsort(group_hashes, kind="stable")
    ordered = group_hashes[by_hash]
    if (ordered[1:] == ordered[:-1]).any() or int(sizes.sum()) != len(row_hashes):
        return None
    start = np.empty(len(sizes), np.int64)
    start[by_hash] = _starts(sizes[by_hash])
    # rows sorted by hash: a group's block holds its hash alone when its first and last do
    if (
        (row_hashes[1:] < row_hashes[:-1]).any()
        or not (sizes > 0).all()
        or not np.array_equal(row_hashes[start], group_hashes)
        or not np.array_equal(row_hashes[start + sizes - 1], group_hashes)
    ):
        return None
    return start


def _read_order(
    group_hashes: npt.NDArray[np.uint64],
    sizes: Ints,
    ranges: list[tuple[int, int]],
    row_hashes: list[npt.NDArray[np.uint64]],
) -> Ints | None:
    """`_group_order` of reads one after the other, each of the groups of one of `ranges`."""
    starts, done = [], 0
    for (first, end), hashes in zip(ranges, row_hashes, strict=True):
        start = _group_order(group_hashes[first:end], sizes[first:end], hashes)
        if start is None:
            return None
        starts.append(start + done)
        done += len(hashes)
    return np.concatenate(starts)


def _take(
    parts: list[dict[str, Any]], ranges: list[tuple[int, int]], start: Ints, sizes: Ints
) -> list[Any]:
    """The five number columns (masked where NULL) of the reads of the groups of `ranges`, end
    to end, with the blocks of rows starting at `start` one after the other, each read's
    column dropped as soon as it is moved (20 million rows: one extra column at a time, not
    five). Blocks of one size are copied as rows from each read, without joining the reads."""
    names = [name for name in parts[0] if name != "key_hash"]
    size = int(sizes[0]) if len(sizes) else 0
    if not (size and (sizes == size).all()):
        columns = _concatenated(parts)
        order = np.repeat(start - _starts(sizes), sizes) + np.arange(int(sizes.sum()))
        return [columns.pop(name)[order] for name in names]
    read_starts = _starts(np.asarray([len(part[names[0]]) for part in parts], np.int64)).tolist()
    out = []
    for name in names:
        values = np.empty(len(start) * size, parts[0][name].dtype)
        mask = None
        for part, (first, end), done in zip(parts, ranges, read_starts, strict=True):
            rows = _blocks(part.pop(name), start[first:end] - done, size)
            values[first * size : end * size] = np.ma.getdata(rows)
            if np.ma.isMaskedArray(rows):
                mask = np.zeros(len(values), np.bool_) if mask is None else mask
                mask[first * size : end * size] = np.ma.getmaskarray(rows)
        out.append(values if mask is None else np.ma.MaskedArray(values, mask))
    return out


def _key_ranges(key_changes: npt.NDArray[np.bool_], sizes: Ints) -> list[tuple[int, int]]:
    """Runs [first, end) of the groups (in key order) of about `ROWS_PER_READ` rows each, cut
    where the query key changes (`_changes` of the keys): each is read apart, by a range of
    query keys."""
    total, count = int(sizes.sum()), len(sizes)
    parts = -(-total // ROWS_PER_READ)
    if parts <= 1:
        return [(0, count)]
    new_key = np.flatnonzero(key_changes) + 1  # groups that start a query key
    at = np.searchsorted(_starts(sizes)[new_key], np.arange(1, parts) * total / parts)
    edges = [0, *np.unique(new_key[at[at < len(new_key)]]).tolist(), count]
    return list(pairwise(edges))


def _concatenated(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The columns of reads one after the other (masked where NULL), each read's column
    dropped once copied."""
    names = list(parts[0]) if parts else []
    out = {}
    for name in names:
        pieces = [part.pop(name) for part in parts]
        values = np.concatenate([np.ma.getdata(piece) for piece in pieces])
        if any(np.ma.isMaskedArray(piece) for piece in pieces):
            mask = np.concatenate([np.ma.getmaskarray(piece) for piece in pieces])
            values = np.ma.MaskedArray(values, mask)
        out[name] = values
        del pieces
    return out


def _blocks(values: Any, start: Ints, size: int) -> Any:
    """values[s:s + size] for each s in `start`, end to end (a masked array stays masked)."""
    if np.ma.isMaskedArray(values):
        data = rows_at(np.ma.getdata(values), start, size).reshape(-1)
        return np.ma.MaskedArray(data, rows_at(np.ma.getmaskarray(values), start, size).ravel())
    return rows_at(values, start, size).reshape(-1)


class StoreGroupsMixin(StoreBase):
    def grouped_samples(
        self,
        target_ids: Sequence[int],
        query_keys: Sequence[str] | None = None,
        windows: Sequence[Window] = (),
    ) -> GroupedSamples:
        """The observations of these targets (of these queries only, if given) as plan groups;
        with `windows`, the logged executions of each window instead, under its side id."""
        parameters: list[Any] = [list(target_ids), None if query_keys is None else list(query_keys)]
        group_sql, samples_sql, hashed_sql = _OF_TARGETS
        if windows:
            parameters = [
                [w.side_id for w in windows],
                parameters[1],
                [w.since for w in windows],
                [w.until for w in windows],
                [w.source for w in windows],
            ]
            group_sql, samples_sql, hashed_sql = _OF_WINDOWS
        with self.transaction():  # every read sees the same rows
            groups = list(self._con.execute(group_sql, parameters).fetchnumpy().values())
            keys, points, targets, fingerprints = (column.tolist() for column in groups[:4])
            sizes, hashes = (np.asarray(column) for column in groups[4:])
            sizes, hashes = sizes.astype(np.int64), hashes.astype(np.uint64)
            key_changes = _changes(keys)
            ranges = _key_ranges(key_changes, sizes)
            parts = [
                self._con.execute(
                    hashed_sql,
                    [
                        *parameters,
                        keys[first] if first > 0 else None,
                        keys[end] if end < len(keys) else None,
                    ],
                ).fetchnumpy()
                for first, end in ranges
            ]
            start = _read_order(hashes, sizes, ranges, [part.pop("key_hash") for part in parts])
            if start is None:  # two groups with one hash: DuckDB sorts (slower, more memory)
                parts = [self._con.execute(samples_sql, parameters).fetchnumpy()]
        durations, planning, cost, sample_indices, blocks = (
            list(parts[0].values())[:5] if start is None else _take(parts, ranges, start, sizes)
        )
        blocks = window_medians(np.asarray(blocks, np.float64), _starts(sizes), sizes)
        shared: dict[str, str] = {}  # one str per distinct key and fingerprint, not per group
        return GroupedSamples(
            list(map(shared.setdefault, keys, keys)),
            points,
            targets,
            list(map(shared.setdefault, fingerprints, fingerprints)),
            blocks,
            sizes.reshape(-1),
            _query_numbers(key_changes | _changes(points), len(keys)),
            *_column(durations),
            *_column(planning),
            np.asarray(cost, np.float64),
            np.asarray(np.ma.getdata(sample_indices)),
        )

    def query_texts(self) -> dict[str, tuple[str, str]]:
        """(name, SQL) per query key: what a comparison shows of its queries."""
        columns = self._con.execute("SELECT query_key, name, sql FROM queries").fetchnumpy()
        keys, names, texts = (column.tolist() for column in columns.values())
        return dict(zip(keys, zip(names, texts, strict=True), strict=True))

    def plan_examples(
        self, target_ids: Sequence[int]
    ) -> dict[tuple[int, str, str | None, str], str]:
        """EXPLAIN JSON per (target, query, point, fingerprint), where the store has one."""
        rows = self._con.execute(
            "SELECT target_id, query_key, point, fingerprint, plan_json FROM plan_examples "
            "WHERE target_id IN (SELECT unnest($1::BIGINT[]))",
            [list(target_ids)],
        ).fetchall()
        return {(t, q, p, f): plan_json for t, q, p, f, plan_json in rows}
