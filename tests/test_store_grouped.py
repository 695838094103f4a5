"""Grouped reads: rows ordered in numpy by the hash of their group key give what DuckDB's
ORDER BY gives, NULLs and all; a hash shared by two groups falls back to DuckDB's sort."""

from __future__ import annotations

from dataclasses import fields, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import new_run, observation

from detector.store import GroupedSamples, Store
from detector.store import grouped as store_grouped

NAMES = sorted(p.stem for p in (Path(__file__).parent / "fixtures" / "store").glob("*.json"))


def filled(path: Path) -> list[int]:
    rng = np.random.default_rng(4)
    with Store(path) as store:
        targets = new_run(store, names=("pg15/a", "pg15/b"))
        batch = []
        for target in targets:
            for k in range(3):
                for sample in rng.permutation(8).tolist():
                    kind = NAMES[(k + sample % 2) % len(NAMES)]  # two plan shapes per side
                    row = observation(target, kind, sample)
                    row = replace(row, query_key=f"q{k}", duration_ms=float(rng.random()))
                    if sample == 3:
                        row = replace(row, planning_ms=None, duration_ms=None)
                    batch.append(row)
        store.add_observations(batch)
    return targets


def same(a: GroupedSamples, b: GroupedSamples) -> None:
    for field in fields(GroupedSamples):
        left, right = getattr(a, field.name), getattr(b, field.name)
        if isinstance(left, np.ndarray):
            assert np.array_equal(left, right, equal_nan=left.dtype.kind == "f"), field.name
        else:
            assert left == right, field.name


def test_numpy_order_is_duckdbs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.duckdb"
    targets = filled(path)
    with Store(path, read_only=True) as store:
        with monkeypatch.context() as patched:  # DuckDB's sort is not asked
            groups, _, hashed_sql = store_grouped._OF_TARGETS
            patched.setattr(
                store_grouped, "_OF_TARGETS", (groups, "SELECT no_such_column", hashed_sql)
            )
            hashed = store.grouped_samples(targets)
            only = store.grouped_samples(targets, ["q1"])
        monkeypatch.setattr(store_grouped, "_group_order", lambda *_: None)
        same(hashed, store.grouped_samples(targets))
        same(only, store.grouped_samples(targets, ["q1"]))
        empty = store.grouped_samples(targets, ["nothing"])
    assert len(hashed.fingerprints) > 6 and not hashed.duration_known.all()
    assert set(only.query_keys) == {"q1"} and empty.sizes.size == 0


def test_groups_of_one_size_are_moved_as_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.duckdb"
    rng = np.random.default_rng(5)
    with Store(path) as store:
        targets = new_run(store, names=("pg15/a", "pg15/b"))
        batch = []
        for target in targets:
            for k in range(5):
                for sample in rng.permutation(6).tolist():  # one plan shape per side
                    row = observation(target, NAMES[k % len(NAMES)], sample)
                    row = replace(row, query_key=f"q{k}", duration_ms=float(rng.random()))
                    if sample == 2:
                        row = replace(row, planning_ms=None, duration_ms=None)
                    batch.append(row)
        store.add_observations(batch)
    moved: list[int] = []
    blocks = store_grouped._blocks
    monkeypatch.setattr(store_grouped, "_blocks", lambda *a: moved.append(a[2]) or blocks(*a))
    with Store(path, read_only=True) as store:
        fast = store.grouped_samples(targets)
        monkeypatch.setattr(store_grouped, "_group_order", lambda *_: None)
        same(fast, store.grouped_samples(targets))
    assert moved == [6] * 5 and set(fast.sizes.tolist()) == {6}
    assert not fast.duration_known.all()


def test_reads_split_by_query_key_give_one_reads_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.duckdb"
    targets = filled(path)
    ranges = store_grouped._key_ranges
    split: list[list[tuple[int, int]]] = []

    def recorded(*args: Any) -> list[tuple[int, int]]:
        split.append(ranges(*args))
        return split[-1]

    monkeypatch.setattr(store_grouped, "_key_ranges", recorded)
    with Store(path, read_only=True) as store:
        whole = store.grouped_samples(targets)
        for rows in (1, 7, 20, 30):
            monkeypatch.setattr(store_grouped, "ROWS_PER_READ", rows)
            same(whole, store.grouped_samples(targets))
    # 48 rows, 16 of each query key: a read holds whole keys
    assert [len(parts) for parts in split] == [1, 3, 3, 3, 2]
    for parts in split:
        assert parts[0][0] == 0 and parts[-1][1] == len(whole.sizes)
        assert all(end == first for (_, end), (first, _) in pairwise(parts))
