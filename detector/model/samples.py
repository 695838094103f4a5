"""One side's numbers per sample as windows on arrays that the sides of a comparison share,
and what rules read of many of them at once (`extremes`) without a Python float per sample."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from itertools import repeat
from operator import attrgetter, is_
from typing import Any, TypeVar, overload

import numpy as np
import numpy.typing as npt

N = TypeVar("N", int, float)


class Samples(Sequence[N]):
    """One side's numbers per sample, read and compared like a tuple: a window on an array
    that the sides of a comparison share (a million sides would otherwise hold 40 million
    float objects)."""

    __slots__ = ("_start", "_stop", "_values")

    def __init__(self, values: npt.NDArray[Any], start: int, stop: int) -> None:
        self._values, self._start, self._stop = values, start, stop

    def window(self) -> tuple[npt.NDArray[Any], int, int]:
        """The shared array, and where these numbers start and stop in it."""
        return self._values, self._start, self._stop

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> npt.NDArray[Any]:
        return np.array(self._values[self._start : self._stop], dtype=dtype)

    def __len__(self) -> int:
        return self._stop - self._start

    def __bool__(self) -> bool:
        return self._stop > self._start

    def __iter__(self) -> Iterator[N]:
        return iter(self._values[self._start : self._stop].tolist())

    @overload
    def __getitem__(self, index: int) -> N: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[N, ...]: ...
    def __getitem__(self, index: int | slice) -> N | tuple[N, ...]:
        return tuple(self)[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Samples | tuple):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


def rows_at(
    values: npt.NDArray[Any], starts: npt.NDArray[np.int64], length: int
) -> npt.NDArray[Any]:
    """values[start:start + length] for each start, as the rows of a new (starts, length) array:
    copied row by row from a strided view, without an index per cell."""
    rows: npt.NDArray[Any]
    if len(starts) == 0 or length == 0 or len(values) < length:
        rows = np.asarray(values)[starts[:, None] + np.arange(length)]
    else:
        rows = np.lib.stride_tricks.sliding_window_view(values, length)[starts]
    return rows


def shared_windows(
    sequences: Sequence[Sequence[Any]],
) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """(the array, starts, stops) when every sequence is a `Samples` window of one array (as
    a comparison builds its sides), else None."""
    if not sequences or set(map(type, sequences)) != {Samples}:
        return None
    values = sequences[0]._values  # type: ignore[attr-defined]
    if not all(map(is_, map(_VALUES, sequences), repeat(values))):
        return None
    count = len(sequences)
    starts = np.fromiter(map(_START, sequences), np.int64, count)
    stops = np.fromiter(map(_STOP, sequences), np.int64, count)
    return values, starts, stops


_VALUES, _START, _STOP = attrgetter("_values"), attrgetter("_start"), attrgetter("_stop")


def extremes(sequences: Sequence[Sequence[float]]) -> tuple[list[int], list[float], list[float]]:
    """The length, min and max of each sequence (NaN for an empty one's min and max)."""
    shared = shared_windows(sequences)
    if shared is None:
        sizes = [len(s) for s in sequences]
        lows = [min(s) if s else math.nan for s in sequences]
        highs = [max(s) if s else math.nan for s in sequences]
        return sizes, lows, highs
    values, starts, stops = shared
    array, counts = np.asarray(values, np.float64), stops - starts
    low, high = np.full(len(counts), np.nan), np.full(len(counts), np.nan)
    for n in np.unique(counts[counts > 0]).tolist():
        members = np.flatnonzero(counts == n)
        rows = rows_at(array, starts[members], n)
        low[members], high[members] = rows.min(axis=1), rows.max(axis=1)
    return counts.tolist(), low.tolist(), high.tolist()


def row_medians(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """np.median(rows, axis=1), NaN for a row with a NaN (or none), from a sort of the rows:
    numpy sorts short rows about three times faster than np.median partitions them."""
    count, n = rows.shape
    if n == 0:
        return np.full(count, np.nan)
    ordered = np.sort(rows, axis=1)  # NaN last
    middle = (ordered[:, (n - 1) // 2] + ordered[:, n // 2]) / 2
    return np.where(np.isnan(ordered[:, -1]), np.nan, middle)


def window_medians(
    values: npt.NDArray[np.float64], starts: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """The median of each window values[start:start + size], as np.median (NaN when empty)."""
    medians = np.full(len(sizes), np.nan)
    for n in np.unique(sizes[sizes > 0]).tolist():
        members = np.flatnonzero(sizes == n)
        end_to_end = len(members) * n == len(values) and np.array_equal(
            starts[members], np.arange(0, len(values), n)
        )
        rows = values.reshape(-1, n) if end_to_end else rows_at(values, starts[members], n)
        medians[members] = row_medians(rows)
    return medians
