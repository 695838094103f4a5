"""Rule gates: a closed gate means the rule is silent, and `RuleRunner.many` finds what calling
the runner query by query finds, over every rule fixture and each timing verdict."""

from __future__ import annotations

from dataclasses import replace

from rule_cases import case_files, load_case

from detector.model import QueryComparison, Verdict
from rules import Rule, RuleRunner, all_rules


def comparisons() -> list[QueryComparison]:
    found = []
    for path in case_files():
        comparison = load_case(path).comparison
        for verdict in Verdict:
            found.append(replace(comparison, timing=replace(comparison.timing, verdict=verdict)))
    return found


def seen_by(rule: Rule, every: list[QueryComparison]) -> list[QueryComparison]:
    """The comparisons the runner shows the rule: those with a plan on both sides, unless it
    reads failures (a query that failed on every execution of a side has no plan there)."""
    if rule.without_plans:
        return every
    return [c for c in every if c.baseline.plans and c.candidate.plans]


def test_a_closed_gate_means_no_finding() -> None:
    every = comparisons()
    for rule in all_rules():
        if rule.gate is None:
            continue
        options = rule.resolve_options()
        for comparison in seen_by(rule, every):
            if not rule.gate(comparison, options):
                assert list(rule.check(comparison, options)) == [], (rule.code, comparison.label)


def test_many_finds_what_one_by_one_finds() -> None:
    every = comparisons()
    runner = RuleRunner()
    assert list(runner.many(every)) == [runner(c) for c in every]
    assert list(runner.many(every[::-1])) == [runner(c) for c in every[::-1]]


def test_a_closed_each_gate_means_no_finding() -> None:
    every = comparisons()
    for rule in all_rules():
        if rule.each is None:
            continue
        options = rule.resolve_options()
        seen = seen_by(rule, every)
        for comparison, open_ in zip(seen, rule.each(seen, options), strict=True):
            if not open_:
                assert list(rule.check(comparison, options)) == [], (rule.code, comparison.label)
