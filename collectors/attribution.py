"""Which settings moved the plan: tested by re-planning, not listed.

When two sides of a run chose different plans for the same parameter values, the candidate's
statement is planned again (plain EXPLAIN, nothing executed) with subsets of its differing
settings set back to the baseline's values. Settings interact, so single reverts are not
enough: the search finds every MINIMAL set whose revert brings the baseline's plan back
(singles, then pairs, ..., skipping supersets of a set already found; past `MAX_REPLANS`
re-plans, delta debugging shrinks the whole set to one minimal set, and the result says the
search was cut). Reverting on the candidate and applying on the baseline are the same experiment
here: the variants of one server differ only in these settings, so "the candidate with S set
back" is "the baseline with the candidate's values of everything but S".

Two readings of the same sets, both recorded:
- restoring sets (revert direction): random_page_cost 4 -> 1.5 and effective_cache_size 16MB ->
  4GB that flip the plan only together give {random_page_cost}, {effective_cache_size}: either
  one reverted restores it;
- causes (apply direction, the minimal hitting sets of the restoring sets, each confirmed by
  planning the baseline with only that set applied): here {random_page_cost,
  effective_cache_size}, "together". When work_mem or random_page_cost alone each flips it, the
  restoring set is {random_page_cost, work_mem} (both must go back) and the causes are
  {work_mem}, {random_page_cost}: "either alone".
A setting in any restoring set is part of the cause and never called innocent; only a complete
search can say a setting does not move the plan.

When no setting does, the flip belongs to the server (the version's planner, or its statistics)
and collectors/forcing.py forces the baseline's plan on the candidate instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Protocol, TypeVar

import psycopg

from collectors.session import one_statement
from detector.model import Plan, fingerprint, parse_plan

PLAN_ONLY = "EXPLAIN (FORMAT JSON) "
MAX_REPLANS = 64  # re-plans the search for restoring sets may spend per flip (then _shrink)
MAX_CAUSE_SETTINGS = 10  # causes (hitting sets) are derived when the sets name at most this many


class Planned(Protocol):
    """What attribution needs of a runner side."""

    name: str
    gucs: dict[str, str]
    connection: psycopg.Connection[Any]


Names = tuple[str, ...]
P = TypeVar("P", bound=Planned)


@dataclass(frozen=True)
class Attribution:
    baseline: str
    candidate: str
    sample_index: int
    tested: Names  # the differing settings that were reverted
    restoring: tuple[Names, ...]  # the minimal sets whose revert brings the baseline's plan back
    reverted: Mapping[str, str]  # the values that revert each tested setting
    causes: tuple[Names, ...] = ()  # minimal sets that alone move the baseline's plan away
    replans: int = 0
    complete: bool = True  # every subset not containing a restoring set was planned
    # no revert restores it: the settings that force the baseline's plan on the candidate
    forced: Mapping[str, str] = field(default_factory=dict)
    # the candidate's chosen plan and the rejected one, both costed on the candidate
    costs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def restores(self) -> Names:
        """Every setting that is part of the cause (in some restoring set)."""
        return tuple(sorted({name for names in self.restoring for name in names}))

    @property
    def rejected_plan_settings(self) -> dict[str, str]:
        """What makes the candidate run the plan it rejected (empty: nothing found does): the
        smallest restoring set, else the forcing settings."""
        if self.restoring:
            return {name: self.reverted[name] for name in self.restoring[0]}
        return dict(self.forced)

    def as_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "sample_index": self.sample_index,
            "tested": list(self.tested),
            "restores": list(self.restores),
            "restoring_sets": [list(names) for names in self.restoring],
            "causes": [list(names) for names in self.causes],
            "search": {"replans": self.replans, "budget": MAX_REPLANS, "complete": self.complete},
        }
        if self.forced:
            info["forced"] = dict(self.forced)
        if self.costs:
            info["near_tie"] = dict(self.costs)
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
    """Re-plan the candidate's statement with subsets of the baseline's settings."""
    reverts = _reverts(baseline, candidate)
    names = tuple(sorted(reverts))

    def restores(subset: Names) -> bool:
        overrides = {name: reverts[name] for name in subset}
        return _plan_of(candidate, sql, params, overrides, timeout) == baseline_fingerprint

    restoring, replans, complete = minimal_sets(names, restores, MAX_REPLANS)
    causes: tuple[Names, ...] = ()
    if restoring:
        causes, checked = _confirmed_causes(names, restoring, restores)
        replans += checked
    return Attribution(
        baseline.name,
        candidate.name,
        sample_index,
        names,
        restoring,
        reverts,
        causes,
        replans,
        complete,
    )


def minimal_sets(
    names: Names, holds: Callable[[Names], bool], budget: int
) -> tuple[tuple[Names, ...], int, bool]:
    """(the minimal subsets of `names` for which `holds`, tests spent, whether the search was
    complete): by size, skipping supersets of sets found; past `budget` tests, one minimal set
    by delta debugging (when the whole set holds)."""
    found: list[Names] = []
    spent = 0
    for size in range(1, len(names) + 1):
        for subset in combinations(names, size):
            if any(set(known) <= set(subset) for known in found):
                continue
            if spent >= budget:
                if not found:
                    found_one, used = _shrink(names, holds)
                    spent += used
                    found.extend(found_one)
                return tuple(found), spent, False
            spent += 1
            if holds(subset):
                found.append(subset)
    return tuple(found), spent, True


def _shrink(names: Names, holds: Callable[[Names], bool]) -> tuple[list[Names], int]:
    """One minimal subset for which `holds`, by delta debugging's complement step: drop chunks
    of half the settings, then quarters, ... single ones, while the rest still holds (for 20
    settings and a set of 3, about 30 re-plans, not 2^20)."""
    spent = 1
    if not holds(names):
        return [], spent
    current = list(names)
    size = max(len(current) // 2, 1)
    while True:
        start = 0
        while start < len(current) and len(current) > 1:
            rest = current[:start] + current[start + size :]
            spent += 1
            if rest and holds(tuple(rest)):
                current = rest
            else:
                start += size
        if size == 1:
            return [tuple(sorted(current))], spent
        size = max(size // 2, 1)


def _confirmed_causes(
    names: Names, restoring: tuple[Names, ...], restores: Callable[[Names], bool]
) -> tuple[tuple[Names, ...], int]:
    """The minimal hitting sets of the restoring sets, each kept only if applying it alone (the
    others set back) moves the plan away from the baseline's; empty when one is not."""
    involved = sorted({name for names in restoring for name in names})
    if len(involved) > MAX_CAUSE_SETTINGS:
        return (), 0
    hitting: list[Names] = []
    for size in range(1, len(involved) + 1):
        for subset in combinations(involved, size):
            if any(set(known) <= set(subset) for known in hitting):
                continue
            if all(set(subset) & set(names_) for names_ in restoring):
                hitting.append(subset)
    checked = 0
    for cause in hitting:
        checked += 1
        if restores(tuple(name for name in names if name not in cause)):
            return (), checked
    return tuple(hitting), checked


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


def plan_on(
    side: Planned,
    sql: str,
    params: Mapping[str, Any] | None,
    overrides: Mapping[str, str],
    timeout: str,
) -> Plan:
    """The side's plan for these parameters with `overrides` laid over its settings."""
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
    return fingerprint(plan_on(side, sql, params, overrides, timeout))


def first_difference(
    sides: Sequence[P], fingerprints: Mapping[tuple[str, int], str]
) -> list[tuple[P, P, int]]:
    """(baseline, candidate, sample index) for every ordered pair of sides a comparison would
    set against each other (the variants of one server, or one variant on two servers) whose
    plans differ, at the first sample where they do, both directions of each pair (the
    caller times only the one in the run's order of sides unless asked)."""
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
