"""Charts of the HTML report, as geometry for templates/chart.svg.j2 (inline SVG, works offline).

Two charts: a query's latency CDF (both sides, median/p90/p99 marked) and seed 000's sweep chart
(each side's estimated cost and measured duration against the swept parameter, marker shape =
plan shape, a vertical line where the costs and where the durations cross). Python lays them out
(scales, ticks, label rows that never overlap); the template only draws. The same data gives the
same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from detector.engine.sweeps import SweepAnalysis, SweepGroup
from detector.model import QueryComparison
from detector.model.units import fmt_ms
from detector.reports.common import fmt_number, fmt_tick
from detector.reports.comparison.chart_axes import Scale, bounds, spread

TONES = ("base", "cand")  # the sides' colours (report.css: svg.chart .base, .cand)
SHAPES = ("circle", "square", "triangle", "diamond", "down", "plus", "cross", "star")
CHAR = 6.2  # px per character of the charts' 11px sans-serif labels (wide enough for most fonts)
LABEL_ROW = 15  # px per row of crossing labels
MAX_POINT_TICKS = 12  # a sweep of more points gets round ticks, not one per point
MAX_STEPS = 240  # a CDF of more samples is drawn through this many quantiles
PERCENTILES = (("median", "circle", 0.5), ("p90", "square", 0.9), ("p99", "triangle", 0.99))


@dataclass(frozen=True)
class Tick:
    at: float  # px along its axis
    text: str


@dataclass(frozen=True)
class Line:
    d: str  # SVG path
    tone: str  # base, cand or grey (a CSS class)
    dash: str = ""  # dash or dot (a CSS class); "" solid


@dataclass(frozen=True)
class Mark:
    d: str  # SVG path of the marker
    tone: str
    hollow: bool
    title: str


@dataclass(frozen=True)
class Rule:
    """A vertical line across the plot (a crossing, a median)."""

    x: float
    top: float
    bottom: float
    tone: str
    dash: str


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    anchor: str = "start"


@dataclass(frozen=True)
class LegendEntry:
    x: float
    y: float
    text: str
    tone: str
    dash: str = ""  # a line sample unless `shape` is set
    shape: str = ""

    @property
    def d(self) -> str:
        return marker(self.shape, self.x + 13, self.y - 4) if self.shape else ""


@dataclass(frozen=True)
class Chart:
    chart_id: str
    kind: str
    title: str  # the chart's accessible name
    width: float
    height: float
    left: float
    top: float
    right: float
    bottom: float
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    y2_ticks: tuple[Tick, ...] = ()
    x_title: str = ""
    y_title: str = ""
    y2_title: str = ""
    lines: tuple[Line, ...] = ()
    marks: tuple[Mark, ...] = ()
    rules: tuple[Rule, ...] = ()
    labels: tuple[Label, ...] = ()
    legend: tuple[LegendEntry, ...] = field(default=())


def marker(shape: str, x: float, y: float, r: float = 3.6) -> str:
    """The SVG path of a marker centred on (x, y)."""
    if shape == "circle":
        return f"M{x - r:.1f},{y:.1f}a{r},{r} 0 1,0 {2 * r},0a{r},{r} 0 1,0 {-2 * r},0Z"
    corners = {
        "square": ((-r, -r), (r, -r), (r, r), (-r, r)),
        "triangle": ((0, -r * 1.2), (r * 1.1, r * 0.8), (-r * 1.1, r * 0.8)),
        "down": ((0, r * 1.2), (r * 1.1, -r * 0.8), (-r * 1.1, -r * 0.8)),
        "diamond": ((0, -r * 1.3), (r, 0), (0, r * 1.3), (-r, 0)),
        "plus": ((-r / 3, -r), (r / 3, -r), (r / 3, -r / 3), (r, -r / 3), (r, r / 3),
                 (r / 3, r / 3), (r / 3, r), (-r / 3, r), (-r / 3, r / 3), (-r, r / 3),
                 (-r, -r / 3), (-r / 3, -r / 3)),
        "cross": ((-r, -r / 2), (-r / 2, -r), (0, -r / 2), (r / 2, -r), (r, -r / 2), (r / 2, 0),
                  (r, r / 2), (r / 2, r), (0, r / 2), (-r / 2, r), (-r, r / 2), (-r / 2, 0)),
    }.get(shape)  # fmt: skip
    if corners is None:  # star
        corners = tuple(
            ((r * 1.3 if i % 2 == 0 else r * 0.55) * math.sin(i * math.pi / 5),
             -(r * 1.3 if i % 2 == 0 else r * 0.55) * math.cos(i * math.pi / 5))
            for i in range(10)
        )  # fmt: skip
    return "M" + "L".join(f"{x + dx:.1f},{y + dy:.1f}" for dx, dy in corners) + "Z"


def _px(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def _path(xy: Sequence[tuple[float, float]]) -> str:
    """A polyline through the points."""
    return "M" + "L".join(f"{_px(x)},{_px(y)}" for x, y in xy)


def _step_path(corners: Sequence[tuple[float, float]]) -> str:
    """A step line through corners that alternate a vertical and a horizontal move (as
    `_steps` makes them): `V` and `H` take one number where a corner takes two."""
    (x, y), moves = corners[0], []
    for index, (cx, cy) in enumerate(corners[1:]):
        if index % 2 == 0 and cy != y:
            moves.append(f"V{_px(cy)}")
        elif index % 2 and cx != x:
            moves.append(f"H{_px(cx)}")
        x, y = cx, cy
    return f"M{_px(corners[0][0])},{_px(corners[0][1])}" + "".join(moves)


def _steps(values: list[float]) -> list[tuple[float, float]]:
    """The empirical CDF as (value, fraction) corners of a step line (drawn `post`)."""
    count = len(values)
    if count > MAX_STEPS:
        values = [values[round(i * (count - 1) / (MAX_STEPS - 1))] for i in range(MAX_STEPS)]
    out = [(values[0], 0.0)]
    for index, value in enumerate(values):
        fraction = (index + 1) / len(values)
        out += [(value, out[-1][1]), (value, fraction)]
    return out[1:]


def cdf_chart(query: QueryComparison, chart_id: str) -> Chart:
    """Empirical CDF of both sides' durations, median/p90/p99 marked on each curve."""
    sides = [(s, c) for s, c in ((query.baseline, "base"), (query.candidate, "cand"))
             if s.durations_ms]  # fmt: skip
    everything = [float(v) for side, _ in sides for v in side.durations_ms]
    log = spread(everything)
    width, left, right, top, bottom = 620.0, 52.0, 604.0, 10.0, 196.0
    x = Scale(*bounds(everything, log), left, right, log)
    y = Scale(0.0, 1.0, bottom, top, False)
    lines, marks, rules = [], [], []
    entries: list[tuple[str, str, str]] = []  # (text, tone, shape)
    for side, tone in sides:
        values = sorted(float(v) for v in side.durations_ms)
        lines.append(Line(_step_path([(x(v), y(f)) for v, f in _steps(values)]), tone))
        if side.timing:  # the numbers are in the timings table beside the chart
            picks = (side.timing.median_ms, side.timing.p90_ms, side.timing.p99_ms)
            for (_, shape, quantile), value in zip(PERCENTILES, picks, strict=True):
                marks.append(Mark(marker(shape, x(value), y(quantile)), tone, False, ""))
            rules.append(Rule(x(side.timing.median_ms), top, bottom, tone, "dot"))
        entries.append((f"{side.label} (n={len(values)})", tone, ""))
    entries += [(name, "grey", shape) for name, shape, _ in PERCENTILES]
    legend, row = flow(entries, left, right, bottom + 40)
    return Chart(
        chart_id, "cdf", f"latency CDF of {query.label}", width, row + 10, left, top, right,
        bottom, _ticks(x, _plain), tuple(Tick(y(t), f"{t:g}") for t in (0, 0.25, 0.5, 0.75, 1)),
        x_title="duration (ms)", y_title="fraction of executions", lines=tuple(lines),
        marks=tuple(marks), rules=tuple(rules), legend=tuple(legend),
    )  # fmt: skip


def flow(
    entries: Sequence[tuple[str, str, str]], left: float, right: float, top: float
) -> tuple[list[LegendEntry], float]:
    """Legend entries (text, tone, marker shape or "" for a line) left to right, wrapping;
    returns them and the baseline of the last row."""
    out, x, row = [], left, top
    for text, tone, shape in entries:
        width = 32 + len(text) * CHAR + 16
        if x > left and x + width > right:
            x, row = left, row + 16
        out.append(LegendEntry(x, row, text, tone, shape=shape))
        x += width
    return out, row


def _plain(value: float) -> str:
    return f"{value:g}"


def _ticks(scale: Scale, fmt: Callable[[float], str]) -> tuple[Tick, ...]:
    return tuple(Tick(scale(t), fmt(t)) for t in scale.ticks())


def label_rows(
    wanted: Sequence[tuple[float, str]], left: float, right: float
) -> list[tuple[Label, int]]:
    """Labels at x positions, each in the first row where it overlaps no other label: (label,
    row). A label reads rightwards from its line, or ends at it when it would leave the chart;
    it is kept between `left` and `right`."""
    rows: list[float] = []  # the right end of the last label of each row
    placed = []
    for x, text in sorted(wanted):
        width = len(text) * CHAR
        start = x + 3 if x + 3 + width <= right else x - 3 - width
        start = min(max(start, left), right - width)
        row = next((i for i, end in enumerate(rows) if end + 8 <= start), len(rows))
        if row == len(rows):
            rows.append(0.0)
        rows[row] = start + width
        placed.append((Label(start, 0.0, text), row))
    return placed


def sweep_chart(group: SweepGroup, analysis: SweepAnalysis, chart_id: str) -> Chart:
    """Seed 000's chart: estimated cost (solid, left axis) and median duration (dashed, right
    axis) of each side's plan per point; vertical lines where the costs and durations cross."""
    xs = [p.value for p in group.points]
    width, left, right = 760.0, 64.0, 690.0
    crossings = [
        *((c, "", f"costs cross {group.param}≈{fmt_number(c)}") for c in analysis.cost_crossings),
        *((c, "dash", f"durations cross {group.param}≈{fmt_number(c)}")
          for c in analysis.duration_crossings),
    ]  # fmt: skip
    x = Scale(min(xs), max(xs), left + 12, right - 12, analysis.log_x)
    if len(xs) == 1 or min(xs) == max(xs):
        x = Scale(xs[0] - 1, xs[0] + 1, left + 12, right - 12, False)
    placed = label_rows([(x(c), text) for c, _, text in crossings], left, right)
    band = max((row for _, row in placed), default=-1) + 1
    top = 10.0 + band * LABEL_ROW + (6 if band else 0)
    bottom = top + 230
    costs, durations = analysis.all_costs(), analysis.all_durations()
    cost_log, time_log = spread(costs), spread(durations)
    y = Scale(*bounds(costs, cost_log, floor_zero=True), bottom, top, cost_log)
    y2 = Scale(*bounds(durations, time_log, floor_zero=True), bottom, top, time_log)
    lines, marks = [], []
    for series, tone in zip(analysis.series, TONES, strict=True):
        timed = [(a, d) for a, d in zip(xs, series.durations, strict=True) if not math.isnan(d)]
        lines.append(Line(_path([(x(a), y(c)) for a, c in zip(xs, series.costs, strict=True)]),
                          tone))  # fmt: skip
        if timed:
            lines.append(Line(_path([(x(a), y2(d)) for a, d in timed]), tone, "dash"))
        for point, cost, duration, shape in zip(
            group.points, series.costs, series.durations, series.shapes, strict=True
        ):
            form = SHAPES[analysis.shape_index[shape] % len(SHAPES)]
            where = f"{series.label} at {group.param}={point.text}"
            marks.append(Mark(marker(form, x(point.value), y(cost)), tone, False,
                              f"{where}: cost {cost:,.1f}, {shape}"))  # fmt: skip
            if not math.isnan(duration):
                marks.append(Mark(marker(form, x(point.value), y2(duration)), tone, True,
                                  f"{where}: median {fmt_ms(duration)} ms, {shape}"))  # fmt: skip
    rules = [Rule(x(c), 8.0, bottom, "grey", dash) for c, dash, _ in crossings]
    labels = [
        Label(label.x, 10.0 + row * LABEL_ROW + 10, label.text, label.anchor)
        for label, row in placed
    ]
    ticks = tuple(
        Tick(x(p.value), fmt_tick(p.value) if group.numeric else p.text) for p in group.points
    )
    if group.numeric and len(group.points) > MAX_POINT_TICKS:
        ticks = _ticks(x, fmt_tick)
    legend, row = _sweep_legend(analysis, left, bottom + 44, right)
    return Chart(
        chart_id, "sweep", f"cost and duration of {group.name} against {group.param}", width,
        row + 10, left, top, right, bottom, ticks, _ticks(y, fmt_tick), _ticks(y2, _plain),
        x_title=group.param, y_title="estimated cost (solid)",
        y2_title="median duration, ms (dashed)", lines=tuple(lines), marks=tuple(marks),
        rules=tuple(rules), labels=tuple(labels), legend=tuple(legend),
    )  # fmt: skip


def _sweep_legend(
    analysis: SweepAnalysis, left: float, top: float, right: float
) -> tuple[list[LegendEntry], float]:
    entries, x, row = [], left, top
    for series, tone in zip(analysis.series, TONES, strict=True):
        entries.append(LegendEntry(x, row, series.label, tone))
        x += 40 + len(series.label) * CHAR + 16
    entries.append(LegendEntry(x, row, "cost", "grey"))
    entries.append(LegendEntry(x + 80, row, "duration", "grey", dash="dash"))
    for shape, index in sorted(analysis.shape_index.items(), key=lambda kv: kv[1]):
        row += 16
        text = shape if len(shape) <= 110 else shape[:109] + "…"
        form = SHAPES[index % len(SHAPES)]
        entries.append(LegendEntry(left, row, text, "grey", shape=form))
    return entries, row
