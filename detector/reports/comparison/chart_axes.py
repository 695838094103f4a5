"""Axes of the HTML report's SVG charts: linear or logarithmic scales and their ticks.

A scale maps data to pixels; ticks are at round values (1, 2, 2.5, 5 x 10^k on a linear axis;
powers of ten, with 2 and 5 between them when the axis spans less than two decades, on a log
axis), so the charts read like any plotting library's, at a few hundred bytes per chart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

TICKS = 5  # about this many ticks per axis


@dataclass(frozen=True)
class Scale:
    low: float
    high: float
    start: float  # pixel of `low`
    end: float  # pixel of `high` (smaller than start for a y axis: pixels grow downwards)
    log: bool

    def __call__(self, value: float) -> float:
        if self.log:
            low, high, value = math.log10(self.low), math.log10(self.high), math.log10(value)
        else:
            low, high = self.low, self.high
        span = high - low or 1.0
        return self.start + (value - low) / span * (self.end - self.start)

    def ticks(self) -> list[float]:
        return log_ticks(self.low, self.high) if self.log else linear_ticks(self.low, self.high)


def spread(values: Sequence[float]) -> bool:
    """Worth a log axis: positive values over more than ~1.5 decades."""
    finite = [v for v in values if not math.isnan(v)]
    positive = [v for v in finite if v > 0]
    return bool(positive) and len(positive) == len(finite) and max(positive) / min(positive) > 30


def _step(span: float) -> float:
    raw = span / TICKS
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def bounds(values: Sequence[float], log: bool, floor_zero: bool = False) -> tuple[float, float]:
    """The axis range around `values`: whole decades on a log axis, round steps on a linear one
    (from 0 when `floor_zero`), never empty."""
    finite = [v for v in values if not math.isnan(v) and (v > 0 or not log)]
    if not finite:
        return (1.0, 10.0) if log else (0.0, 1.0)
    low, high = min(finite), max(finite)
    if log:
        return 10 ** math.floor(math.log10(low)), 10 ** math.ceil(math.log10(high) + 1e-12)
    if floor_zero and low >= 0:
        low = 0.0
    if high == low:
        high, low = high + (abs(high) or 1.0) / 2, low - (abs(low) or 1.0) / 2 * (not floor_zero)
    step = _step(high - low)
    return math.floor(low / step) * step, math.ceil(high / step) * step


def linear_ticks(low: float, high: float) -> list[float]:
    step = _step(high - low)
    first = math.ceil(low / step - 1e-9)
    count = math.floor(high / step + 1e-9) - first + 1
    return [round((first + i) * step, 12) for i in range(max(count, 0))]


def log_ticks(low: float, high: float) -> list[float]:
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    between = (1, 2, 5) if math.log10(high / low) < 2.5 else (1,)
    found = [m * 10.0**d for d in decades for m in between]
    return [t for t in found if low * (1 - 1e-9) <= t <= high * (1 + 1e-9)]
