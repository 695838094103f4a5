"""The logic behind a flip's cause, apart from the server: the search for minimal restoring sets
(fed by a table of which reverts restore the plan: what re-planning would answer), the switch
point in estimated rows, and the words PS500 and the near-tie say. The same logic runs against
real PostgreSQL in test_attribution_interactions.py and test_attribution_estimates.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from collectors.attribution import Names, minimal_sets
from detector.model import QueryComparison, TimingComparison, Verdict
from detector.model.estimates import Estimated, estimate_switch
from rules import causes
from rules.causes import counterfactual_text
from rules.common import near_tie
from rules.gucs import SettingChange


def _restores(flip: Callable[[set[str]], bool], names: Names) -> Callable[[Names], bool]:
    """`holds(S)`: reverting S restores the plan, i.e. the flip needs what is left applied."""
    return lambda subset: not flip(set(names) - set(subset))


def test_minimal_sets_of_settings_that_act_together_or_alone() -> None:
    names = ("a", "b", "c")
    both = _restores(lambda applied: {"a", "b"} <= applied, names)  # a AND b
    assert minimal_sets(names, both, 64) == ((("a",), ("b",)), 3, True)
    either = _restores(lambda applied: bool({"a", "b"} & applied), names)  # a OR b
    found, _, complete = minimal_sets(names, either, 64)
    assert found == (("a", "b"),) and complete
    mixed = _restores(lambda applied: "a" in applied and bool({"b", "c"} & applied), names)
    assert minimal_sets(names, mixed, 64)[0] == (("a",), ("b", "c"))


def test_past_its_budget_the_search_finds_one_set_by_delta_debugging() -> None:
    names = tuple(f"s{i:02d}" for i in range(20))
    needed = {"s03", "s11", "s17"}  # the flip holds while any one of them is applied (OR)
    holds = _restores(lambda applied: bool(needed & applied), names)
    found, spent, complete = minimal_sets(names, holds, 30)
    assert found == (("s03", "s11", "s17"),) and not complete
    assert spent <= 30 + 40  # a few dozen re-plans, not 2^20


def _change(name: str, before: str, after: str) -> SettingChange:
    return SettingChange(name, before, after, "cost units")


def test_the_words_of_causes_together_and_alone() -> None:
    changes = [
        _change("effective_cache_size", "16MB", "4GB"),
        _change("random_page_cost", "4", "1.5"),
        _change("work_mem", "4MB", "64kB"),
    ]
    together = {
        "tested": ["effective_cache_size", "random_page_cost", "work_mem"],
        "restoring_sets": [["effective_cache_size"], ["random_page_cost"]],
        "causes": [["effective_cache_size", "random_page_cost"]],
        "search": {"complete": True, "budget": 64},
    }
    assert causes.tested_text(together, changes, None) == (
        "caused by effective_cache_size 16MB -> 4GB and random_page_cost 4 -> 1.5 together "
        "(either one reverted restores the plan) (work_mem also differs but does not move it)"
    )
    either = {
        "tested": ["random_page_cost", "work_mem"],
        "restoring_sets": [["random_page_cost", "work_mem"]],
        "causes": [["random_page_cost"], ["work_mem"]],
        "search": {"complete": True, "budget": 64},
    }
    assert causes.tested_text(either, changes, None) == (
        "caused by either of random_page_cost 4 -> 1.5 or work_mem 4MB -> 64kB alone "
        "(reverting both is needed to restore the plan)"
    )
    cut = {**together, "search": {"complete": False, "budget": 64}}
    text = causes.tested_text(cut, changes, None)
    assert "does not move it" not in text
    assert "the search stopped at its budget of 64 re-plans: work_mem and other" in text
    old_store = {"tested": ["random_page_cost", "work_mem"], "restores": ["random_page_cost"]}
    assert causes.tested_text(old_store, changes, None).startswith(
        "caused by random_page_cost 4 -> 1.5: setting it back on the candidate brings"
    )


def _timed(verdict: str, ratio: float, low: float, high: float) -> dict[str, object]:
    return {
        "forced_settings": {"random_page_cost": "4"},
        "fingerprint_matched": True,
        "samples": 10,
        "median_ms": 1.0,
        "chosen_median_ms": 1.02,
        "interval": {
            "verdict": verdict,
            "ratio": ratio,
            "ci_low": low,
            "ci_high": high,
            "p_value": 0.3,
            "min_effect": 0.1,
            "reason": "CI within the ±10% equivalence margin",
        },
    }


def test_the_counterfactual_is_worded_by_its_interval() -> None:
    same = counterfactual_text(_timed("unchanged", 0.98, 0.95, 1.02))
    assert "indistinguishable from the chosen one, 1.02x faster (95% CI" in same
    assert "the planner chose the faster plan" not in same
    slower = counterfactual_text(_timed("regressed", 1.3, 1.2, 1.4))
    assert "1.30x slower (95% CI 1.20-1.40) than the chosen one" in slower
    assert slower.endswith("the planner chose the faster plan")
    faster = counterfactual_text(_timed("improved", 0.8, 0.75, 0.85))
    assert "the planner's choice costs 25%" in faster
    old = counterfactual_text({**_timed("unchanged", 1, 1, 1), "interval": None})
    assert "no interval (recorded without its pairs)" in old


def _rows(side: str, point: str, plan: str, rows: float, sample: int = 0) -> Estimated:
    return Estimated(side, point, sample, plan, {"public.t": rows})


def test_a_flip_follows_the_estimate_when_one_switch_point_explains_both_sides() -> None:
    executions = [
        _rows("baseline", "N=100", "candidate", 160),
        _rows("baseline", "N=400", "baseline", 650),
        _rows("candidate", "N=400", "candidate", 130),
        _rows("candidate", "N=1600", "baseline", 520),
    ]
    switch = estimate_switch(executions, "N=400")
    assert switch is not None and switch.follows_estimate
    assert (switch.baseline_rows, switch.candidate_rows) == (650, 130)
    assert switch.band == (160, 520)
    # one side never chose the other plan: its own switch point is not pinned
    assert estimate_switch(executions[1:3], "N=400") is None
    # a side whose choices its estimates do not separate: no switch point of its own
    mixed = [*executions, _rows("candidate", "N=800", "candidate", 700)]
    assert estimate_switch(mixed, "N=400") is None


def test_a_switch_point_the_planner_moved_is_not_the_estimate() -> None:
    """PostgreSQL 15 and 18 on a sysbench range (default statistics target, measured): 15
    switches to the bitmap between 5626 and 5648 estimated rows, 18 between 5424 and 5432."""
    executions = [
        _rows("baseline", "N=5400", "baseline", 5626, 0),
        _rows("baseline", "N=5800", "candidate", 5648, 1),
        _rows("candidate", "N=5200", "baseline", 5424, 2),
        _rows("candidate", "N=5800", "candidate", 5432, 3),
        _rows("baseline", "N=5500", "baseline", 5540, 4),
        _rows("candidate", "N=5500", "candidate", 5610, 4),
    ]
    switch = estimate_switch(executions, "N=5500")
    assert switch is not None and not switch.follows_estimate
    info = switch.as_info()
    assert info["baseline_switch"] == [5626, 5648] and info["candidate_switch"] == [5424, 5432]
    moved = ["public.t correlation id 0.6184 -> 0.6268"]
    text = causes.estimate_text(info, "PostgreSQL 15.18 -> 18.6", moved)
    assert text == (
        "the switch point moved: the baseline switches plans between 5,626 and 5,648 estimated "
        "rows of public.t, the candidate between 5,424 and 5,432 (PostgreSQL 15.18 -> 18.6, "
        "public.t correlation id 0.6184 -> 0.6268; correlations from each server's ANALYZE "
        "sample); the row estimates differ too: 5,540 vs 5,610 estimated rows of public.t for the "
        "same parameters"
    )


def test_near_tie_from_the_candidate_s_own_costs() -> None:
    from test_rules_helpers import side

    base = side("pg15/join_nested_loop")
    chosen = dataclasses.replace(base.plans[0], fingerprint="chosen", samples=10)
    cand = dataclasses.replace(base, plans=(chosen,))
    timing = TimingComparison(Verdict.UNCHANGED, 1.0, 0.95, 1.05, 0.5, 0.1, None, "r")
    comparison = QueryComparison("k", "q", "SELECT 1", base, cand, timing)
    forced = {"chosen_cost": 100.0, "rejected_cost": 101.0, "gap": 0.0099, "samples": 5}
    tie = near_tie(dataclasses.replace(comparison, attribution={"near_tie": forced}), 0.02)
    assert tie.tied and tie.rejected_cost == 101.0 and tie.candidate_cost == 100.0
    assert (
        tie.text()
        == "near-tie on the candidate (chosen plan cost 100.0 vs 101.0 for the rejected one)"
    )
    assert tie.evidence()["near_tie_basis"] == "candidate"
    apart = {**forced, "rejected_cost": 150.0, "gap": 0.33}
    assert not near_tie(dataclasses.replace(comparison, attribution={"near_tie": apart}), 0.02).tied
    # the candidate chose the rejected plan itself for 3 of its 10 samples: it sits on its own
    # switch point, whatever the gap of the flipped samples
    rejected = dataclasses.replace(base.plans[0], samples=3)
    mixed = dataclasses.replace(cand, plans=(dataclasses.replace(chosen, samples=7), rejected))
    on_switch = dataclasses.replace(comparison, candidate=mixed, attribution={"near_tie": apart})
    tie = near_tie(on_switch, 0.02)
    assert tie.tied and tie.rejected_share == 0.3
    assert tie.text().endswith("which the candidate itself chose for 30% of its samples)")
