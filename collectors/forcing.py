"""The plan a candidate rejected, put back on the candidate: forced, and costed there.

Forcing: the enable_* settings of the plan methods only the candidate's plan uses are turned
off (`forcing_settings`), a few rounds, and kept only when EXPLAIN then shows the baseline's
plan. Some differences have no enable_* switch (partial aggregation, a Gather): then cost
settings are tried one at a time (`cost_nudges`: parallel_tuple_cost = 5 brings back the
partial aggregation of TPC-H Q17 on PostgreSQL 18), on top of the switches and alone.

Near-tie from the same server: the candidate's chosen plan and its rejected plan, both planned
on the candidate in the candidate's own settings (forced with enable_* only, which leave the
costs of the other nodes as they are), for the same parameters. Their gap says how close the
choice was on that server; comparing two servers' chosen-plan costs would measure how their
statistics differ, which changes with every ANALYZE.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from collectors.attribution import Planned, plan_on
from detector.model import fingerprint, normalized_cost
from detector.model.settings import cost_nudges, forces_in_candidate_units, forcing_settings

MAX_FORCING_ROUNDS = 4  # plan methods forbidden in turn to force the baseline's plan
NEAR_TIE_SAMPLES = 5  # flipped samples whose chosen and rejected costs are compared


def force_plan(
    baseline: Planned,
    candidate: Planned,
    sql: str,
    params: Mapping[str, Any] | None,
    baseline_fingerprint: str,
    timeout: str,
) -> dict[str, str]:
    """Settings under which the candidate plans the baseline's plan; empty when none found."""
    wanted = plan_on(baseline, sql, params, {}, timeout)
    forced: dict[str, str] = {}
    chosen = plan_on(candidate, sql, params, forced, timeout)
    for _ in range(MAX_FORCING_ROUNDS):
        more = {k: v for k, v in forcing_settings(chosen, wanted).items() if k not in forced}
        if not more:
            break
        forced.update(more)
        chosen = plan_on(candidate, sql, params, forced, timeout)
        if fingerprint(chosen) == baseline_fingerprint:
            return forced
    for nudge in cost_nudges(chosen, wanted):
        for base in ({**forced, **nudge}, nudge) if forced else (nudge,):
            if fingerprint(plan_on(candidate, sql, params, base, timeout)) == baseline_fingerprint:
                return dict(base)
    return {}


def rejected_costs(
    candidate: Planned,
    sql: str,
    samples: Sequence[Mapping[str, Any] | None],
    baseline_fingerprint: str,
    forced: Mapping[str, str],
    timeout: str,
) -> dict[str, Any]:
    """The candidate's chosen plan against the plan it rejected, both costed on the candidate
    for the same parameters (up to NEAR_TIE_SAMPLES flipped samples): median costs and the
    median relative gap; empty when the rejected plan cannot be forced in the candidate's own
    cost units."""
    if not forced or not forces_in_candidate_units(forced):
        return {}
    chosen_costs: list[float] = []
    rejected: list[float] = []
    for params in samples[:NEAR_TIE_SAMPLES]:
        plan = plan_on(candidate, sql, params, forced, timeout)
        if fingerprint(plan) != baseline_fingerprint:
            continue
        chosen_costs.append(
            normalized_cost(plan_on(candidate, sql, params, {}, timeout).total_cost)
        )
        rejected.append(normalized_cost(plan.total_cost))
    if not rejected:
        return {}
    gaps = [
        abs(r - c) / max(r, c) if max(r, c) > 0 else 0.0
        for c, r in zip(chosen_costs, rejected, strict=True)
    ]
    return {
        "chosen_cost": statistics.median(chosen_costs),
        "rejected_cost": statistics.median(rejected),
        "gap": statistics.median(gaps),
        "samples": len(rejected),
        "forced": dict(forced),
    }


def unforced(tested: Sequence[str]) -> dict[str, Any]:
    """The counterfactual entry when the rejected plan could not be put back: why."""
    tried = "setting the differing settings back" if tested else "no setting differed"
    return {
        "forced_settings": {},
        "fingerprint_matched": False,
        "samples": 0,
        "median_ms": None,
        "chosen_median_ms": None,
        "ratio_vs_chosen": None,
        "reason": f"{tried}; forbidding the candidate's plan methods (enable_*) and nudging the "
        "parallel cost settings did not give the baseline's plan either",
    }
