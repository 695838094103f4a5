"""Medians and percentiles of many runs of one array at once.

A comparison hands over its observations sorted by plan group (`Store.grouped_samples`); a
segment is the run of rows of one group or one side, `values[start:end]`. Segments of one
length are sorted and read together, so 200,000 of them cost a few numpy calls. Percentiles
interpolate linearly as numpy's default (and `quantiles.percentile`); a median is the middle
value or the mean of the two middle values, as np.median. (DuckDB's quantile_cont, which
computed these before, rounds the interpolation differently: p90 and p99 may differ from
its figures in the last bit; medians are the same.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from detector.engine.quantiles import lerp
from detector.model.samples import rows_at

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


def offsets(counts: npt.NDArray[np.int64] | npt.NDArray[np.bool_]) -> Ints:
    """Where each run starts, plus the total: [0, c0, c0 + c1, ...]."""
    return np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))


def segment_quantiles(
    values: Floats, starts: Ints, ends: Ints, quantiles: Sequence[float]
) -> Floats:
    """Each quantile (0 to 1) of every segment, shape (segments, quantiles); NaN for an empty
    segment."""
    out = np.full((len(starts), len(quantiles)), np.nan)
    lengths = ends - starts
    for length in np.unique(lengths).tolist():
        if length == 0:
            continue
        members = np.flatnonzero(lengths == length)
        rows = np.sort(windows(values, starts[members], length), axis=1)
        for column, q in enumerate(quantiles):
            position = (length - 1) * q
            lo, hi = math.floor(position), math.ceil(position)
            if lo == hi:
                out[members, column] = rows[:, lo]
            elif q == 0.5:
                out[members, column] = (rows[:, lo] + rows[:, hi]) / 2
            else:
                out[members, column] = lerp(rows[:, lo], rows[:, hi], position - lo)
    return out


def windows(values: npt.NDArray[Any], starts: Ints, length: int) -> npt.NDArray[Any]:
    """`rows_at(values, starts, length)`, as a read-only view without a copy when the windows
    start at even steps (end to end, or every other side of a comparison's pairs)."""
    step = int(starts[1] - starts[0]) if len(starts) > 1 else length
    first = int(starts[0]) if len(starts) else 0
    if (
        len(starts)
        and length > 0
        and step > 0
        and first >= 0
        and np.array_equal(starts, first + step * np.arange(len(starts)))
        and first + step * (len(starts) - 1) + length <= len(values)
    ):
        view = np.lib.stride_tricks.sliding_window_view(values, length)
        found: npt.NDArray[Any] = view[first : first + step * len(starts) : step]
        return found
    return rows_at(values, starts, length)
