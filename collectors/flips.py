"""Where two sides of a run chose different plans for the same parameters: which settings did it
(collectors/attribution.py), how close the choice was on the candidate and the settings that
force the rejected plan there (collectors/forcing.py), the rejected plan timed within a budget
(collectors/counterfactual.py), and whether both sides' choices follow one switch point in
estimated rows (detector/model/estimates.py). All of it is filed in the candidate target's
info, under the query and point, per baseline: `attribution` -> "KEY|POINT" -> BASELINE."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import psycopg

from collectors.attribution import attribute, first_difference
from collectors.counterfactual import Budget, counterfactual
from collectors.forcing import force_plan, rejected_costs, unforced
from collectors.sides import LiveSide, RunOptions
from detector.model import Observation, fingerprint
from detector.model.estimates import Estimated, estimate_switch, scan_estimates
from detector.model.sink import RunSink
from detector.model.workload import Query

COUNTERFACTUAL_SAMPLES = 10  # the rejected plan, timed on the candidate: pairs of executions
# a share of a short measurement would not fit the pairs of a fast query: at least this long
MIN_SHARE_SECONDS = 2.0


@dataclass
class Flip:
    """One ordered pair of sides whose plans differ at a point, and what was found."""

    baseline: LiveSide
    candidate: LiveSide
    point: str | None
    plans: tuple[str, str]  # the baseline's and the candidate's fingerprints where they differ
    info: dict[str, Any]


def attribute_flips(
    query: Query,
    point: str | None,
    sides: Sequence[LiveSide],
    observations: Sequence[Observation],
    options: RunOptions,
    measured_s: float,
    tell: Callable[[str], None],
) -> list[Flip]:
    """Test the cause of every flip at this point; time the rejected plan of each flip in the
    run's order of sides (both directions with `counterfactual_both`), within the budget."""
    if query.generic_plan:
        return []
    by_target = {side.target_id: side.name for side in sides}
    plans = {(by_target[o.target_id], o.sample_index): fingerprint(o.plan) for o in observations}
    params = {o.sample_index: json.loads(o.params) for o in observations}
    bound = {i: params[i] if query.placeholders else None for i in sorted(params)}
    order = {side.name: position for position, side in enumerate(sides)}
    label = f"{query.name} {point or ''}".strip()
    left = budget_seconds(options, measured_s)
    flips = []
    for baseline, candidate, index in first_difference(sides, plans):
        wanted = plans[(baseline.name, index)]
        flipped = [
            bound[i]
            for i in sorted(bound)
            if plans.get((baseline.name, i)) == wanted
            and plans.get((candidate.name, i)) not in (None, wanted)
        ]
        try:
            args = (query.sql, bound[index], wanted)
            found = attribute(baseline, candidate, *args, index, options.statement_timeout)
            forced = force_plan(baseline, candidate, *args, options.statement_timeout)
            if not found.restoring and forced:
                found = replace(found, forced=forced)
            costs = rejected_costs(
                candidate, query.sql, flipped, wanted, forced, options.statement_timeout
            )
            info = replace(found, costs=costs).as_info()
            timed = options.counterfactual_both or order[baseline.name] < order[candidate.name]
            if options.timing != "plan" and timed and options.counterfactual_seconds != 0:
                if not found.rejected_plan_settings:
                    info["counterfactual"] = unforced(found.tested)
                else:
                    expected = _expected_pair_s(observations, baseline, candidate)
                    try:
                        info["counterfactual"] = counterfactual(
                            found,
                            candidate,
                            query.sql,
                            list(bound.values())[:COUNTERFACTUAL_SAMPLES],
                            wanted,
                            options.statement_timeout,
                            _budget(options, measured_s, left),
                            prime=options.prime,
                            expected_pair_s=expected * (2 if options.prime else 1),
                            tell=lambda text: tell(f"{label}: {text}"),
                        )
                    except psycopg.Error as exc:  # the cause stands; say why the timing did not
                        info["counterfactual"] = {
                            **unforced(found.tested),
                            "reason": f"an execution failed: {str(exc).strip()}",
                        }
                    spent = (info["counterfactual"].get("budget") or {}).get("spent_s", 0.0)
                    left = None if left is None else max(left - spent, 0.0)
        except psycopg.Error as exc:  # the measurements stand; say why the test did not
            info = {"error": str(exc).strip()}
        flips.append(
            Flip(baseline, candidate, point, (wanted, plans[(candidate.name, index)]), info)
        )
    return flips


def file_flips(
    store: RunSink, key: str, flips: Sequence[Flip], observations: Sequence[Observation]
) -> None:
    """File each flip's findings, with the estimate switch over all the query's points (for
    sides on two servers: the variants of one server share its statistics)."""
    rows: dict[int, tuple[str, dict[str, float]]] = {}
    for flip in flips:
        if "error" not in flip.info and flip.baseline.connection is not flip.candidate.connection:
            switch = estimate_switch(_estimated(flip, observations, rows), flip.point)
            if switch is not None:
                flip.info["estimates"] = switch.as_info()
        store.file_target_info(
            flip.candidate.target_id,
            "attribution",
            f"{key}|{flip.point or ''}",
            {flip.baseline.name: flip.info},
        )


def _estimated(
    flip: Flip,
    observations: Sequence[Observation],
    known: dict[int, tuple[str, dict[str, float]]],
) -> list[Estimated]:
    """The executions of the flip's two sides that got one of its two plans, labelled (`known`
    keeps each observation's fingerprint and scan estimates for the next flip)."""
    sides = {flip.baseline.target_id: "baseline", flip.candidate.target_id: "candidate"}
    labels = {flip.plans[0]: "baseline", flip.plans[1]: "candidate"}
    found = []
    for o in observations:
        side = sides.get(o.target_id)
        if side is None:
            continue
        if id(o) not in known:
            known[id(o)] = (fingerprint(o.plan), scan_estimates(o.plan))
        plan, rows = known[id(o)]
        if plan in labels:
            found.append(Estimated(side, o.point, o.sample_index, labels[plan], rows))
    return found


def budget_seconds(options: RunOptions, measured_s: float) -> float | None:
    """Seconds the counterfactuals of one query point may spend (None: unbounded)."""
    if options.counterfactual_seconds is not None:
        return options.counterfactual_seconds
    if options.counterfactual_share is None:
        return None
    return max(options.counterfactual_share * measured_s, MIN_SHARE_SECONDS)


def _budget(options: RunOptions, measured_s: float, left: float | None) -> Budget:
    """What is left of the point's budget for the next counterfactual, and how it was set."""
    if left is None:
        return Budget(None, "unbounded budget")
    total = budget_seconds(options, measured_s) or 0.0
    basis = f"budget {left:.1f} s" + (f" left of {total:.1f} s" if left < total else "")
    if options.counterfactual_seconds is None:
        share = options.counterfactual_share or 0.0
        basis += (
            f": {share:.0%} of the measurement ({measured_s:.1f} s), at least "
            f"{MIN_SHARE_SECONDS:g} s"
        )
    return Budget(left, basis)


def _expected_pair_s(
    observations: Sequence[Observation], baseline: LiveSide, candidate: LiveSide
) -> float:
    """A first pair's guess: the candidate's and the baseline's median measured durations."""
    total = 0.0
    for side in (baseline, candidate):
        durations = [
            o.duration_ms for o in observations if o.target_id == side.target_id and o.duration_ms
        ]
        total += statistics.median(durations) / 1000.0 if durations else 0.0
    return total
