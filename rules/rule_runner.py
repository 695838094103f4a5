"""Running the selected rules over the queries of a comparison, skipping what gates rule out.

A comparison of a million queries asks every rule about every query: calling each check
costs more than the rest of the comparison. Rules say cheaply when they are silent (see
`rules.base.rule`): a `gate` per kind of comparison (the same dominant plan objects, plan
change, verdict, approval state, settings and server versions), asked once per kind, and an
`each` gate asked once for the whole list. A check runs only where both are open.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from detector.model import Finding, QueryComparison, Side
from rules.base import Rule, get_rule, select_rules

Selected = list[tuple[Rule, dict[str, Any]]]
# the kind of a comparison, as gates see it: see `rules.base.rule`; objects by id (the
# verdict too: an enum member hashes in Python, an int in C)
Kind = tuple[int, int, bool, int, bool, int, int, int | None, int | None]


def run_rules(
    comparison: QueryComparison,
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Finding]:
    """Apply the selected rules to one query; findings sorted with `Finding.sort_key`.

    `options` maps a rule code or name to option overrides, e.g. `{"PS100": {"near_tie": 0.05}}`.
    """
    return RuleRunner(select=select, ignore=ignore, options=options)(comparison)


def kind_of(comparison: QueryComparison) -> Kind:
    base, cand = comparison.baseline, comparison.candidate
    return (
        id(base.plans[0].plan),
        id(cand.plans[0].plan),
        base.plans[0].fingerprint != cand.plans[0].fingerprint,
        id(comparison.timing.verdict),
        comparison.approved is None,
        id(base.settings),
        id(cand.settings),
        base.server_version_num,
        cand.server_version_num,
    )


class RuleRunner:
    """The selected rules with their resolved options, prepared once for many queries."""

    def __init__(
        self,
        *,
        select: Iterable[str] | None = None,
        ignore: Iterable[str] = (),
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        resolved: dict[str, dict[str, Any]] = {}
        for key, values in (options or {}).items():
            configured = get_rule(key)
            resolved[configured.code] = configured.resolve_options(values)
        self.rules = [
            (selected, resolved.get(selected.code) or selected.resolve_options())
            for selected in select_rules(select, ignore)
        ]
        self.same_plan_rules = [(r, o) for r, o in self.rules if not r.needs_plan_change]
        self.planless_rules = [(r, o) for r, o in self.rules if r.without_plans]

    def __call__(self, comparison: QueryComparison) -> list[Finding]:
        if not _planned(comparison):
            return self._run(comparison, self.planless_rules)  # it failed on a side
        return self._run(
            comparison, self.rules if comparison.plan_changed else self.same_plan_rules
        )

    def many(self, comparisons: Iterable[QueryComparison]) -> Iterator[list[Finding]]:
        """`self(comparison)` for each comparison, in order; rules whose gates are closed for
        a comparison are not called (see `rules.base.rule`)."""
        every = comparisons if isinstance(comparisons, Sequence) else list(comparisons)
        # a query without a plan on a side (it failed there) goes through `self`: looked for
        # only when a gate or kind_of trips on one (an IndexError), so the usual list pays nothing
        try:
            opened = {r.code: r.each(every, o) for r, o in self.rules if r.each is not None}
        except IndexError:
            planned = iter(self.many([c for c in every if _planned(c)]))
            for comparison in every:
                yield next(planned) if _planned(comparison) else self(comparison)
            return
        # comparisons for which some `each` gate is open (few: the others skip the gated rules)
        any_open = list(map(any, zip(*opened.values(), strict=True))) if opened else []
        # per kind: the rules to run, and those to run where their `each` gate is open
        chosen: dict[Kind, tuple[Selected, Selected]] = {}
        held: list[Side] = []  # the sides behind each kind's ids, alive while it is used
        for i, comparison in enumerate(every):
            try:
                kind = kind_of(comparison)
            except IndexError:
                yield self(comparison)
                continue
            found = chosen.get(kind)
            if found is None:
                found = chosen[kind] = self._select(comparison, kind[2])
                held += (comparison.baseline, comparison.candidate)
            always, gated = found
            if gated and any_open[i]:
                selected = always + [(r, o) for r, o in gated if opened[r.code][i]]
                yield self._run(comparison, selected) if selected else []
            else:
                yield self._run(comparison, always) if always else []

    def _select(self, comparison: QueryComparison, changed: bool) -> tuple[Selected, Selected]:
        open_ = [
            (r, o)
            for r, o in (self.rules if changed else self.same_plan_rules)
            if r.gate is None or r.gate(comparison, o)
        ]
        return [(r, o) for r, o in open_ if r.each is None], [
            (r, o) for r, o in open_ if r.each is not None
        ]

    @staticmethod
    def _run(comparison: QueryComparison, selected: Selected) -> list[Finding]:
        findings: list[Finding] = []
        for rule_, chosen in selected:
            for found in rule_.check(comparison, chosen):
                if found.code != rule_.code:
                    raise RuntimeError(f"rule {rule_.code} emitted a finding coded {found.code}")
                findings.append(found)
        if len(findings) > 1:
            findings.sort(key=Finding.sort_key)
        return findings


def _planned(comparison: QueryComparison) -> bool:
    """Both sides have a plan (a query that failed on every execution of a side has none)."""
    return bool(comparison.baseline.plans) and bool(comparison.candidate.plans)
