"""Pairing samples by index in bulk: `aligned_rows` against `aligned` one pair at a time, and
the paired statistics of row arrays against those of the pairs they came from."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from detector.engine.comparison.alignment import aligned, aligned_rows
from detector.engine.comparison.bulk_sides import _windows
from detector.engine.comparison.query_pairs import SidePair
from detector.engine.comparison.segments import offsets
from detector.engine.stats_paired import compare_paired_batch, compare_paired_rows
from detector.model import PlanVariant, Side, parse_plan
from detector.model.comparison import Samples

PLAN = Path(__file__).parent / "fixtures" / "plans" / "pg15" / "range_index_scan.json"


def make_pair(rng: np.random.Generator, name: str) -> SidePair:
    parsed = parse_plan(json.loads(PLAN.read_text())["explain"])
    variant = PlanVariant("f", "s", parsed, 1, 1.0, parsed.total_cost)

    def side(indices: list[int]) -> Side:
        durations = tuple(rng.lognormal(0, 0.3, len(indices)).tolist())
        costs = tuple(float(i) for i in indices)
        return Side(name, None, {}, (variant,), durations, None, None, (), tuple(indices), costs)

    shape = rng.integers(0, 6)
    n = int(rng.integers(1, 12))
    base = list(range(n))
    cand = list(range(n))
    if shape == 1:  # missing samples on one side
        cand = [i for i in cand if rng.random() > 0.3]
    elif shape == 2:  # in group order, not sample order (a side with two plan shapes)
        rng.shuffle(base)
    elif shape == 3:  # a sample index twice
        base = [*base, base[0]]
    elif shape == 4:  # negative and large indices
        base = cand = [-3, 7, 1_000_000, 2]
    elif shape == 5:  # nothing in common
        cand = [i + 100 for i in cand]
    return SidePair(name, name, "", None, side(base), side(cand))


def test_bulk_alignment_matches_pair_by_pair() -> None:
    rng = np.random.default_rng(7)
    pairs = [make_pair(rng, f"q{i}") for i in range(400)]
    rows = aligned_rows(pairs)
    seen: dict[int, tuple[list[float], list[float]]] = {}
    for n, (members, base, cand) in rows.items():
        assert base.shape == cand.shape == (len(members), n)
        assert list(members) == sorted(members)
        for row, i in enumerate(members.tolist()):
            seen[i] = (base[row].tolist(), cand[row].tolist())
    for i, pair in enumerate(pairs):
        expected = aligned(pair)
        assert seen.get(i, ([], [])) == expected


def test_bulk_alignment_of_nothing() -> None:
    assert aligned_rows([]) == {}


def test_row_arrays_give_the_verdicts_of_the_pairs() -> None:
    rng = np.random.default_rng(3)
    base = rng.lognormal(0, 0.2, (300, 10))
    cand = (
        base
        * rng.lognormal(0, 0.05, (300, 10))
        * np.where(np.arange(300) % 7 == 0, 1.3, 1.0)[:, None]
    )
    floors = [0.2 if i % 11 == 0 else None for i in range(300)]
    pairs = list(zip(base.tolist(), cand.tolist(), strict=True))
    assert compare_paired_rows(base, cand, noise_floor=floors) == compare_paired_batch(
        pairs, noise_floor=floors
    )


def test_samples_read_like_tuples() -> None:
    values = np.array([3.0, 1.5, 2.0, 4.0])
    window = Samples[float](values, 1, 3)
    assert window == (1.5, 2.0) and window == (1.5, 2.0) and window != (1.5,)
    assert len(window) == 2 and bool(window) and not Samples[float](values, 2, 2)
    assert list(window) == [1.5, 2.0] and type(next(iter(window))) is float
    assert window[1] == 2.0 and window[::-1] == (2.0, 1.5)
    assert hash(window) == hash((1.5, 2.0)) and repr(window) == "(1.5, 2.0)"
    assert np.asarray(window).tolist() == [1.5, 2.0] and max(window) == 2.0


def test_bulk_alignment_of_shared_windows_matches_pair_by_pair() -> None:
    rng = np.random.default_rng(11)
    tuples = [make_pair(rng, f"q{i}") for i in range(200)]
    tuples = [
        p for p in tuples if len(set(p.baseline.sample_indices)) == len(p.baseline.sample_indices)
    ]
    sides = [s for p in tuples for s in (p.baseline, p.candidate)]
    bounds = offsets(np.array([len(s.sample_indices) for s in sides], np.int64))
    edges = bounds.tolist()
    indices = _windows(np.array([i for s in sides for i in s.sample_indices], np.int64), edges)
    durations = _windows(np.array([d for s in sides for d in s.durations_ms]), edges)
    windowed = [
        SidePair(
            p.query_key,
            p.query_name,
            "",
            None,
            *(
                replace(s, sample_indices=indices[2 * k + j], durations_ms=durations[2 * k + j])
                for j, s in enumerate((p.baseline, p.candidate))
            ),
        )
        for k, p in enumerate(tuples)
    ]
    assert all(isinstance(p.baseline.durations_ms, Samples) for p in windowed)
    fast, slow = aligned_rows(windowed), aligned_rows(tuples)
    assert fast.keys() == slow.keys()
    for n, (members, base, cand) in fast.items():
        assert members.tolist() == slow[n][0].tolist()
        assert base.tolist() == slow[n][1].tolist() and cand.tolist() == slow[n][2].tolist()


def test_extremes_of_shared_windows_equal_those_of_tuples() -> None:
    from detector.model.samples import extremes

    values = np.array([3.0, 1.0, 2.0, 5.0, 4.0, 0.5])
    windows = [Samples(values, 0, 3), Samples(values, 3, 3), Samples(values, 3, 6)]
    bulk = extremes(windows)
    assert bulk == ([3, 0, 3], [1.0, bulk[1][1], 0.5], [3.0, bulk[2][1], 5.0])
    assert np.isnan(bulk[1][1]) and np.isnan(bulk[2][1])
    one_by_one = extremes([tuple(w) for w in windows])
    assert one_by_one[0] == bulk[0]
    assert np.allclose(one_by_one[1], bulk[1], equal_nan=True)
    assert np.allclose(one_by_one[2], bulk[2], equal_nan=True)
