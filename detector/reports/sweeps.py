"""What a sweep shows: each side's plan, cost and duration per point, and where they cross.

Seed 000: the planner switches plans where the estimated costs cross, the clock where the
durations cross; between the two crossings the planner picks the slower plan. With two
forced-plan variants (one plan per side) the crossings are exactly that. When the sides differ
in cost settings, costs are in different units and only the duration crossing is a fact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from detector.model import Side
from detector.model.settings import COST_UNIT_SETTINGS
from detector.reports.common import SweepGroup, fmt_number


@dataclass(frozen=True)
class SideSeries:
    label: str
    shapes: tuple[str, ...]  # dominant plan signature per point
    costs: tuple[float, ...]  # median estimated cost of the dominant plan
    durations: tuple[float, ...]  # median duration of the side (ms); nan when unmeasured


@dataclass(frozen=True)
class Switch:
    """A side's dominant plan changes between two neighbouring points."""

    side: str
    after: str
    before: str
    old: str
    new: str


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


def caption(analysis: SweepAnalysis, param: str, cost_units: Sequence[str]) -> str:
    """What the chart shows, in words that agree with the crossings found (seed 000)."""
    costs = ", ".join(f"{param}≈{fmt_number(x)}" for x in analysis.cost_crossings)
    times = ", ".join(f"{param}≈{fmt_number(x)}" for x in analysis.duration_crossings)
    if cost_units:
        return (
            f"Cost settings differ ({', '.join(cost_units)}): the sides' costs are in different "
            "units, so only where the durations cross is a fact"
            + (f" ({times})" if times else " (nowhere in the measured range)")
            + "; compare forced-plan variants under the same settings to see where the "
            "planner's costs cross."
        )
    if any(len(set(series.shapes)) > 1 for series in analysis.series):
        return (
            "Each side chose its own plan at each point (its switches are listed above), so the "
            "lines compare what the two sides chose: where both ran the same plan they coincide "
            "and nothing crosses; "
            + (f"the durations cross where the plans differ at {times}." if times
               else "where the plans differ, one side is faster throughout.")
        )  # fmt: skip
    if costs and times:
        return (
            f"One plan per side at every point: the planner switches where the costs cross "
            f"({costs}), the clock where the durations cross ({times}); between the two the "
            "planner picks the slower plan."
        )
    if costs:
        return (
            f"One plan per side at every point: the costs cross ({costs}) but the durations do "
            "not, so on one side of the cost crossing the planner picks the slower plan."
        )
    if times:
        return (
            f"One plan per side at every point: the durations cross ({times}) but the costs do "
            "not, so the planner prefers the same plan everywhere and on one side of the "
            "duration crossing that is the slower plan."
        )
    base, cand = analysis.series
    agree = [
        (bc - cc) * (bd - cd) > 0
        for bc, cc, bd, cd in zip(base.costs, cand.costs, base.durations, cand.durations, strict=True)
        if not (math.isnan(bd) or math.isnan(cd))
    ]
    if agree and all(agree):
        verdict = "the plan the planner costs lower is also the faster one at every point."
    elif agree and not any(agree):
        verdict = "the plan the planner costs lower is the slower one at every point."
    else:
        verdict = "the costs or the durations tie somewhere."
    return "One plan per side at every point, and nothing crosses in the measured range: " + verdict
