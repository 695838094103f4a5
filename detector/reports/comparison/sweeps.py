"""The words under a sweep's chart: what the crossings found mean (seed 000); the analysis is
`detector.engine.sweeps`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from detector.engine.sweeps import SweepAnalysis
from detector.reports.common import fmt_number


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
        for bc, cc, bd, cd in zip(
            base.costs, cand.costs, base.durations, cand.durations, strict=True
        )
        if not (math.isnan(bd) or math.isnan(cd))
    ]
    if agree and all(agree):
        verdict = "the plan the planner costs lower is also the faster one at every point."
    elif agree and not any(agree):
        verdict = "the plan the planner costs lower is the slower one at every point."
    else:
        verdict = "the costs or the durations tie somewhere."
    return "One plan per side at every point, and nothing crosses in the measured range: " + verdict
