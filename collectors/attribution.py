"""Which setting moved the plan: tested by re-planning, not listed.

When two sides of a run chose different plans for the same parameter values, the candidate's
statement is planned again (plain EXPLAIN, nothing executed) with each of its differing
settings set back to the baseline's value, one at a time, then in the smallest combinations:
a setting is named as the cause only when reverting it brings the baseline's plan back. When
no setting does, the flip belongs to the server (the version's planner, or its statistics), and
the baseline's plan is forced on the candidate instead: the enable_* settings of the plan
methods only the candidate's plan uses are turned off (`forcing_settings`), and kept only when
EXPLAIN then shows the baseline's plan. Either way the plan the candidate rejected can be timed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Protocol

import psycopg

from collectors.session import one_statement
from detector.model import Plan, fingerprint, parse_plan
from detector.model.settings import forcing_settings

PLAN_ONLY = "EXPLAIN (FORMAT JSON) "
MEASURED = "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) "
MAX_COMBINED = 4  # combinations tried up to this size; beyond it, all settings at once
MAX_FORCING_ROUNDS = 4  # plan methods forbidden in turn to force the baseline's plan


class Planned(Protocol):
    """What attribution needs of a runner side."""

    name: str
    gucs: dict[str, str]
    connection: psycopg.Connection[Any]


@dataclass(frozen=True)
class Attribution:
    baseline: str
    candidate: str
    sample_index: int
    tested: tuple[str, ...]  # the differing settings that were reverted
    restores: tuple[str, ...]  # the smallest set whose revert brings the baseline's plan back
    reverted: Mapping[str, str]  # the values that revert each tested setting
    # no revert restores it: the settings that force the baseline's plan on the candidate
    forced: Mapping[str, str] = field(default_factory=dict)

    @property
    def rejected_plan_settings(self) -> dict[str, str]:
        """What makes the candidate run the plan it rejected (empty: nothing found does)."""
        if self.restores:
            return {name: self.reverted[name] for name in self.restores}
        return dict(self.forced)

    def as_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "sample_index": self.sample_index,
            "tested": list(self.tested),
            "restores": list(self.restores),
        }
        if self.forced:
            info["forced"] = dict(self.forced)
        return info


def attribute(
    baseline: Planned,
    candidate: Planned,
    sql: str,
    params: Mapping[str, Any] | None,
    baseline_fingerprint: str,
    sample_index: int,
    timeout: str,
) -> Attribution:
    """Re-plan the candidate's statement with the baseline's settings, a few at a time."""
    reverts = _reverts(baseline, candidate)
    restores: tuple[str, ...] = ()
    for size in range(1, min(len(reverts), MAX_COMBINED) + 1):
        found = [
            names
            for names in combinations(sorted(reverts), size)
            if _plan_of(candidate, sql, params, {n: reverts[n] for n in names}, timeout)
            == baseline_fingerprint
        ]
        if found:
            restores = found[0]
            break
    everything = tuple(sorted(reverts))
    if (
        not restores
        and len(everything) > MAX_COMBINED
        and _plan_of(candidate, sql, params, reverts, timeout) == baseline_fingerprint
    ):
        restores = everything
    forced = (
        {}
        if restores
        else _forcing(baseline, candidate, sql, params, baseline_fingerprint, timeout)
    )
    return Attribution(
        baseline.name,
        candidate.name,
        sample_index,
        tuple(sorted(reverts)),
        restores,
        reverts,
        forced,
    )


def _forcing(
    baseline: Planned,
    candidate: Planned,
    sql: str,
    params: Mapping[str, Any] | None,
    baseline_fingerprint: str,
    timeout: str,
) -> dict[str, str]:
    """Settings under which the candidate plans the baseline's plan: forbid the plan methods
    only the candidate's plan uses, plan again, and forbid what the new plan still has that the
    baseline's has not, a few rounds; empty when that never gives the baseline's plan."""
    wanted = _plan(baseline, sql, params, {}, timeout)
    forced: dict[str, str] = {}
    chosen = _plan(candidate, sql, params, forced, timeout)
    for _ in range(MAX_FORCING_ROUNDS):
        more = {k: v for k, v in forcing_settings(chosen, wanted).items() if k not in forced}
        if not more:
            return {}
        forced.update(more)
        chosen = _plan(candidate, sql, params, forced, timeout)
        if fingerprint(chosen) == baseline_fingerprint:
            return forced
    return {}


def unforced(found: Attribution) -> dict[str, Any]:
    """The counterfactual entry when the rejected plan could not be put back: why."""
    tried = "setting the differing settings back" if found.tested else "no setting differed"
    return {
        "forced_settings": {},
        "fingerprint_matched": False,
        "samples": 0,
        "median_ms": None,
        "chosen_median_ms": None,
        "ratio_vs_chosen": None,
        "reason": f"{tried}; forbidding the candidate's plan methods (enable_*) did not give the "
        "baseline's plan either",
    }


def counterfactual(
    found: Attribution,
    candidate: Planned,
    sql: str,
    samples: Sequence[Mapping[str, Any] | None],
    baseline_fingerprint: str,
    timeout: str,
) -> dict[str, Any]:
    """Time the plan the candidate rejected on the candidate itself: each sample's parameters
    run with the restoring settings (which bring the baseline's plan back) and as chosen, back
    to back, alternating which goes first, after one unmeasured pass of both. The ratio is the
    median of the per-sample ratios forced / chosen: below 1, the rejected plan was faster."""
    forced_settings = found.rejected_plan_settings
    forced_ms: list[float] = []
    chosen_ms: list[float] = []
    matched = True
    for index, params in enumerate(samples):
        runs = [(True, forced_settings), (False, {})]
        # primed as the run's own samples are: both plans read the parameters' pages once first
        for recorded in (False, True):
            for is_forced, overrides in runs if index % 2 == 0 else runs[::-1]:
                gucs = {"statement_timeout": timeout, **candidate.gucs, **overrides}
                plan_json, _ = one_statement(candidate.connection, MEASURED + sql, params, gucs)
                if not recorded:
                    continue
                plan = parse_plan(str(plan_json))
                if is_forced:
                    matched = matched and fingerprint(plan) == baseline_fingerprint
                (forced_ms if is_forced else chosen_ms).append(float(plan.execution_ms or 0.0))
    ratios = sorted(f / c for f, c in zip(forced_ms, chosen_ms, strict=True) if c > 0)
    ratio = ratios[len(ratios) // 2] if ratios else None
    return {
        "forced_settings": forced_settings,
        "fingerprint_matched": matched,
        "samples": len(forced_ms),
        "median_ms": sorted(forced_ms)[len(forced_ms) // 2] if forced_ms else None,
        "chosen_median_ms": sorted(chosen_ms)[len(chosen_ms) // 2] if chosen_ms else None,
        "ratio_vs_chosen": ratio,
    }


def _reverts(baseline: Planned, candidate: Planned) -> dict[str, str]:
    """Per setting the two variants set differently: the baseline's value (its server default
    where only the candidate sets it)."""
    names = sorted(
        name
        for name in set(baseline.gucs) | set(candidate.gucs)
        if baseline.gucs.get(name) != candidate.gucs.get(name)
    )
    values: dict[str, str] = {}
    for name in names:
        if name in baseline.gucs:
            values[name] = baseline.gucs[name]
            continue
        row = baseline.connection.execute(
            "SELECT reset_val FROM pg_settings WHERE name = %s", [name]
        ).fetchone()
        if row is not None:
            values[name] = str(row[0])
    return values


def _plan(
    side: Planned,
    sql: str,
    params: Mapping[str, Any] | None,
    overrides: Mapping[str, str],
    timeout: str,
) -> Plan:
    gucs = {"statement_timeout": timeout, **side.gucs, **overrides}
    plan_json, _ = one_statement(side.connection, PLAN_ONLY + sql, params, gucs)
    return parse_plan(str(plan_json))


def _plan_of(
    side: Planned,
    sql: str,
    params: Mapping[str, Any] | None,
    overrides: Mapping[str, str],
    timeout: str,
) -> str:
    return fingerprint(_plan(side, sql, params, overrides, timeout))


def first_difference(
    sides: Sequence[Planned], fingerprints: Mapping[tuple[str, int], str]
) -> list[tuple[Planned, Planned, int]]:
    """(baseline, candidate, sample index) for every ordered pair of sides a comparison would
    set against each other (the variants of one server, or one variant on two servers) whose
    plans differ, at the first sample where they do."""
    found = []
    indices = sorted({index for _, index in fingerprints})
    for baseline in sides:
        for candidate in sides:
            comparable = baseline.connection is candidate.connection or (
                baseline.gucs == candidate.gucs
            )
            if baseline is candidate or not comparable:
                continue
            for index in indices:
                before = fingerprints.get((baseline.name, index))
                after = fingerprints.get((candidate.name, index))
                if before is not None and after is not None and before != after:
                    found.append((baseline, candidate, index))
                    break
    return found
