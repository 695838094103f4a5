"""Medians and percentiles of durations: the one definition every report's figures follow.

Linear interpolation between neighbouring order statistics, as numpy's default; a median is
the middle value or the mean of the two middle values, as np.median. `compare` (a side's
`TimingStats`), `timeline` (a segment's median and p90) and the batched form in `segments` all
compute these, so the p90 of the same samples is one number everywhere. numpy only: a log
ingest or a timeline does not load the statistics of verdicts (`stats`, scipy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from detector.model.comparison import TimingStats

Floats = npt.NDArray[np.float64]


def sorted_sample(values: Sequence[float], what: str) -> Floats:
    if len(values) == 0:
        raise ValueError(f"{what} of an empty sample")
    return np.sort(np.asarray(values, dtype=np.float64).ravel())  # sorted: order never matters


def lerp(a: Floats, b: Floats, t: float) -> Floats:
    """numpy's interpolation between neighbouring order statistics (exact at both ends)."""
    return np.asarray(b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t, np.float64)


def median_rows(xs: Floats) -> Floats:
    """Median of each row of a row-sorted array, computed exactly as np.median does."""
    return (xs[:, (xs.shape[1] - 1) // 2] + xs[:, xs.shape[1] // 2]) / 2


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (q in [0, 100]) with linear interpolation, as numpy's default."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    return quantile(sorted_sample(values, "percentile"), q / 100)


def quantile(xs: Floats, p: float) -> float:
    """The p-quantile (p in [0, 1]) of a sorted sample."""
    pos = p * (xs.size - 1)
    lo, hi = math.floor(pos), min(math.floor(pos) + 1, xs.size - 1)
    return float(lerp(xs[lo : lo + 1], xs[hi : hi + 1], pos - lo)[0])


def timing_stats(values: Sequence[float]) -> TimingStats:
    """n, median, p90, p99, min and max of one side's durations (ms)."""
    xs = sorted_sample(values, "timing_stats")
    return TimingStats(
        n=xs.size,
        median_ms=float(median_rows(xs[None, :])[0]),
        p90_ms=quantile(xs, 0.9),
        p99_ms=quantile(xs, 0.99),
        min_ms=float(xs[0]),
        max_ms=float(xs[-1]),
    )
