"""What a sweep shows: each side's plan, cost and duration per point, where each side switches
plans and where the two cross (the report's sweep page draws it, `reports/comparison/sweeps.py`
words it).

Seed 000: the planner switches plans where the estimated costs cross, the clock where the
durations cross; between the two crossings the planner picks the slower plan. With two
forced-plan variants (one plan per side) the crossings are exactly that. When the sides differ
in cost settings, costs are in different units and only the duration crossing is a fact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from detector.engine.census import Switch
from detector.model import ComparisonResult, QueryComparison, Side
from detector.model.settings import COST_UNIT_SETTINGS


@dataclass(frozen=True)
class SweepPoint:
    value: float
    text: str
    query: QueryComparison


@dataclass(frozen=True)
class SweepGroup:
    """The points of one swept query, in parameter order (`numeric`: values are numbers)."""

    name: str
    param: str
    numeric: bool
    points: tuple[SweepPoint, ...]


def sweep_groups(result: ComparisonResult) -> list[SweepGroup]:
    by_key: dict[str, list[QueryComparison]] = {}
    for query in result.queries:
        if query.point is not None:
            by_key.setdefault(query.query_key, []).append(query)
    groups = []
    for queries in by_key.values():
        params = {q.point.partition("=")[0] for q in queries if q.point}
        values = [q.point.partition("=")[2] for q in queries if q.point]
        numeric = all(_is_number(v) for v in values)
        points = [
            SweepPoint(float(v) if numeric else float(i), v, q)
            for i, (v, q) in enumerate(zip(values, queries, strict=True))
        ]
        points.sort(key=lambda p: (p.value, p.text))
        param = params.pop() if len(params) == 1 else "point"
        groups.append(SweepGroup(queries[0].query_name, param, numeric, tuple(points)))
    return sorted(groups, key=lambda g: g.name)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class SideSeries:
    label: str
    shapes: tuple[str, ...]  # dominant plan signature per point
    costs: tuple[float, ...]  # median estimated cost of the dominant plan
    durations: tuple[float, ...]  # median duration of the side (ms); nan when unmeasured


@dataclass(frozen=True)
class SweepAnalysis:
    series: tuple[SideSeries, SideSeries]
    shape_index: dict[str, int]
    cost_crossings: tuple[float, ...]
    duration_crossings: tuple[float, ...]
    switches: tuple[Switch, ...]
    log_x: bool

    def all_costs(self) -> list[float]:
        return [c for s in self.series for c in s.costs]

    def all_durations(self) -> list[float]:
        return [d for s in self.series for d in s.durations if not math.isnan(d)]


def _series(sides: Sequence[Side]) -> SideSeries:
    return SideSeries(
        label=sides[0].label,
        shapes=tuple(s.dominant.signature for s in sides),
        costs=tuple(s.dominant.median_cost for s in sides),
        durations=tuple(s.timing.median_ms if s.timing else math.nan for s in sides),
    )


def crossings(
    xs: Sequence[float],
    a: Sequence[float],
    b: Sequence[float],
    log_x: bool,
    same_plan: Sequence[bool] = (),
) -> list[float]:
    """x where a - b changes sign between neighbouring points (interpolated on log(a/b) when
    both are positive, on log x when the axis is logarithmic). Not between two points where
    both sides ran the same plan (`same_plan[i]`): there one plan's durations differ by noise,
    no plan crosses another."""
    out: list[float] = []
    for i in range(len(xs) - 1):
        if same_plan and same_plan[i] and same_plan[i + 1]:
            continue
        d0, d1 = _gap(a[i], b[i]), _gap(a[i + 1], b[i + 1])
        if d0 is None or d1 is None or d0 * d1 >= 0:  # touching is not crossing
            continue
        t = d0 / (d0 - d1)
        x0, x1 = (math.log(xs[i]), math.log(xs[i + 1])) if log_x else (xs[i], xs[i + 1])
        x = x0 + t * (x1 - x0)
        out.append(math.exp(x) if log_x else x)
    return out


def _gap(a: float, b: float) -> float | None:
    if math.isnan(a) or math.isnan(b):
        return None
    if a > 0 and b > 0:
        return math.log(a / b)
    return a - b


def analyze(group: SweepGroup) -> SweepAnalysis:
    xs = [p.value for p in group.points]
    positive = all(x > 0 for x in xs)
    log_x = group.numeric and positive and max(xs) / min(xs) > 30
    base = _series([p.query.baseline for p in group.points])
    cand = _series([p.query.candidate for p in group.points])
    shape_index: dict[str, int] = {}
    for series in (base, cand):
        for shape in series.shapes:
            shape_index.setdefault(shape, len(shape_index))
    switches = []
    for series in (base, cand):
        for i in range(len(xs) - 1):
            if series.shapes[i] != series.shapes[i + 1]:
                switches.append(
                    Switch(
                        series.label,
                        group.points[i].text,
                        group.points[i + 1].text,
                        series.shapes[i],
                        series.shapes[i + 1],
                    )
                )
    same = [a == b for a, b in zip(base.shapes, cand.shapes, strict=True)]
    return SweepAnalysis(
        series=(base, cand),
        shape_index=shape_index,
        cost_crossings=tuple(crossings(xs, base.costs, cand.costs, log_x, same)),
        duration_crossings=tuple(crossings(xs, base.durations, cand.durations, log_x, same)),
        switches=tuple(switches),
        log_x=log_x,
    )


def cost_settings_differ(setting_names: Sequence[str]) -> list[str]:
    """The differing settings that change the unit of cost (enable_* only change the choice)."""
    return [name for name in setting_names if name in COST_UNIT_SETTINGS]
