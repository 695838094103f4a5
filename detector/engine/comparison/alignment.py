"""Samples of the two sides of a query matched by sample index, for paired statistics.

Sample i of an interleaved run ran back to back on both sides with the same parameters; the
paired statistics need, per query, the durations of the samples both sides have, in sample
order (`aligned`). `aligned_rows` does it for a million queries at once: sides whose samples
are windows of the arrays a comparison shares (as `pair_sides` builds them) and whose sample
indices are the same strictly increasing run on both sides (every sample measured on both,
once) are read off those arrays directly; the others go through a sort by (pair, index).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np

from detector.engine.comparison.segments import Floats, Ints, offsets, windows
from detector.model import Side
from detector.model.samples import shared_windows

if TYPE_CHECKING:
    from detector.engine.comparison.query_pairs import SidePair

Rows = dict[int, tuple[Ints, Floats, Floats]]


def aligned(pair: SidePair) -> tuple[list[float], list[float]]:
    """The durations of the samples both sides have, in sample order."""
    candidate = dict(zip(pair.candidate.sample_indices, pair.candidate.durations_ms, strict=True))
    both = sorted(
        (index, duration, candidate[index])
        for index, duration in zip(
            pair.baseline.sample_indices, pair.baseline.durations_ms, strict=True
        )
        if index in candidate
    )
    return [b for _, b, _ in both], [c for _, _, c in both]


def aligned_rows(pairs: Sequence[SidePair]) -> Rows:
    """`aligned` for many pairs at once, by number of common samples n: (the pairs' positions,
    ascending; their baseline and candidate durations as (pairs, n) arrays). Pairs without a
    common sample are left out."""
    direct, rest = _same_indices(pairs)
    if not rest:
        return direct
    sorted_ = _sorted_rows([pairs[i] for i in rest])
    positions = np.asarray(rest, np.int64)
    for n, (members, base, cand) in sorted_.items():
        members = positions[members]
        if n in direct:
            members = np.concatenate((direct[n][0], members))
            base = np.concatenate((direct[n][1], base))
            cand = np.concatenate((direct[n][2], cand))
            order = np.argsort(members, kind="stable")
            members, base, cand = members[order], base[order], cand[order]
        direct[n] = (members, base, cand)
    return dict(sorted(direct.items()))


def _same_indices(pairs: Sequence[SidePair]) -> tuple[Rows, list[int]]:
    """The rows of pairs whose two sides are windows of the shared arrays with the same
    strictly increasing, non-negative sample indices; the positions of the other pairs."""
    sides = [*map(attrgetter("baseline"), pairs), *map(attrgetter("candidate"), pairs)]
    indices = shared_windows(list(map(attrgetter("sample_indices"), sides)))
    durations = shared_windows(list(map(attrgetter("durations_ms"), sides)))
    if (
        indices is None
        or durations is None
        or not np.array_equal(indices[1], durations[1])
        or not np.array_equal(indices[2], durations[2])
    ):
        return {}, list(range(len(pairs)))
    index, starts, stops = indices
    values, count = durations[0], len(pairs)
    base_start, cand_start = starts[:count], starts[count:]
    sizes = stops[:count] - base_start
    done = np.zeros(count, np.bool_)
    found: Rows = {}
    for n in np.unique(sizes[(sizes > 0) & (sizes == stops[count:] - cand_start)]).tolist():
        members = np.flatnonzero((sizes == n) & (stops[count:] - cand_start == n))
        ib = windows(index, base_start[members], n)
        same = (ib == windows(index, cand_start[members], n)).all(axis=1) & (ib[:, 0] >= 0)
        same &= (np.diff(ib, axis=1) > 0).all(axis=1)
        if same.any():
            kept = members[same]
            done[kept] = True
            found[n] = (
                kept,
                np.asarray(windows(values, base_start[kept], n), np.float64),
                np.asarray(windows(values, cand_start[kept], n), np.float64),
            )
    return found, np.flatnonzero(~done).tolist()


def _sorted_rows(pairs: Sequence[SidePair]) -> Rows:
    """`aligned_rows` by a sort of every sample by (pair, index): any indices."""
    sides = [_flat([getattr(p, who) for p in pairs]) for who in ("baseline", "candidate")]
    width = max(int(index.max(initial=0)) for index, _, _ in sides) + 1
    irregular = np.zeros(len(pairs), np.bool_)  # a sample index twice or < 0: `aligned`
    keys = []
    for index, _, owner in sides:
        key = owner * width + index
        order = np.argsort(key, kind="stable")
        keys.append((key[order], order))
        irregular[owner[order][1:][np.diff(key[order]) == 0]] = True
        irregular[owner[index < 0]] = True
    kept = []
    for (key, order), (_, duration, owner) in zip(keys, sides, strict=True):
        keep = ~irregular[owner[order]]
        kept.append((key[keep], duration[order[keep]]))
    common, at_b, at_c = np.intersect1d(kept[0][0], kept[1][0], True, return_indices=True)
    base, cand = kept[0][1][at_b], kept[1][1][at_c]
    sizes = np.bincount(common // width, minlength=len(pairs))
    starts = offsets(sizes)
    slow = {i: aligned(pairs[i]) for i in np.flatnonzero(irregular).tolist()}
    for i, (b, _) in slow.items():
        sizes[i] = len(b)
    found = {}
    for n in np.unique(sizes[sizes > 0]).tolist():
        members = np.flatnonzero(sizes == n)
        fast = ~irregular[members]
        cells = starts[members[fast], None] + np.arange(n)
        rows = np.empty((len(members), n)), np.empty((len(members), n))
        rows[0][fast], rows[1][fast] = base[cells], cand[cells]
        for row in np.flatnonzero(~fast).tolist():
            rows[0][row], rows[1][row] = slow[int(members[row])]
        found[n] = (members, *rows)
    return found


def _flat(sides: list[Side]) -> tuple[Ints, Floats, Ints]:
    """Sample indices and durations of these sides end to end, and the side of each sample."""
    sizes = np.fromiter(map(len, (s.sample_indices for s in sides)), np.int64, len(sides))
    if any(len(s.durations_ms) != len(s.sample_indices) for s in sides):
        raise ValueError("a side has not one sample index per duration")
    total = int(sizes.sum())
    owner = np.repeat(np.arange(len(sides)), sizes)
    shared = _shared(sides)
    if shared is not None:
        indices, durations, starts = shared
        rows = np.arange(total) + np.repeat(starts - offsets(sizes)[:-1], sizes)
        return indices[rows], durations[rows], owner
    index = np.fromiter(chain.from_iterable(s.sample_indices for s in sides), np.int64, total)
    duration = np.fromiter(chain.from_iterable(s.durations_ms for s in sides), np.float64, total)
    return index, duration, owner


def _shared(sides: list[Side]) -> tuple[Ints, Floats, Ints] | None:
    """(indices, durations, where each side starts in them) when every side's samples are
    windows at the same place of two shared arrays, as `pair_sides` builds them."""
    indices = shared_windows([s.sample_indices for s in sides])
    durations = shared_windows([s.durations_ms for s in sides])
    if indices is None or durations is None or not np.array_equal(indices[1], durations[1]):
        return None
    return indices[0], durations[0], indices[1]
