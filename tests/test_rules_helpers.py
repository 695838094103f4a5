"""The helpers rule families share: node matching (rules.matching), settings (rules.gucs),
and the q-error (rules.row_estimates), on captured plans."""

from __future__ import annotations

import dataclasses
import gc
import json
from pathlib import Path
from typing import Any

import pytest

from detector.model import Plan, PlanVariant, Side, parse_plan
from detector.model.settings import default_of, normalized
from detector.model.units import fmt_version
from rules import matching
from rules.gucs import (
    settings_changes,
    side_settings,
    version_change,
)
from rules.matching import (
    facts,
    join_tree,
    joins,
    memo,
    parallel_divisor,
    placed_nodes,
    relation_keys,
    relations_under,
    top_joins,
)
from rules.ps102_index_to_seq_scan import scan_size
from rules.row_estimates import misestimates

PLANS = Path(__file__).resolve().parent / "fixtures" / "plans"


def plan(name: str) -> Plan:
    return parse_plan(json.loads((PLANS / f"{name}.json").read_text())["explain"])


def side(name: str, settings: dict[str, str] | None = None, version: int | None = None) -> Side:
    document = json.loads((PLANS / f"{name}.json").read_text())
    parsed = parse_plan(document["explain"])
    variant = PlanVariant("f", "s", parsed, 1, 1.0, parsed.total_cost)
    return Side(
        label=name,
        server_version_num=version or document["server_version_num"],
        settings=settings if settings is not None else document["gucs"],
        plans=(variant,),
        durations_ms=(1.0,),
        timing=None,
    )


def test_joins_are_keyed_by_relations_with_aliases() -> None:
    (nested,) = joins(plan("pg15/join_nested_loop"))
    assert (nested.method, nested.outer, nested.inner) == (
        "Nested Loop",
        ("sbtest2 b",),
        ("sbtest1 a",),
    )
    (swapped,) = joins(plan("pg15/join_order_swapped"))
    assert swapped.relations == nested.relations
    assert (swapped.outer, swapped.inner) == (("sbtest1 a",), ("sbtest2 b",))


def test_join_tree_of_a_ten_way_star_join() -> None:
    star = plan("rules/pg15/star_join")
    (root,) = top_joins(star)
    tree = join_tree(root)
    assert tree.count("(") == 9 and tree.count(" x ") == 9
    assert tree.startswith("(((((((((sbtest2 t0 x sbtest2 t")
    assert len(joins(star)) == 9
    assert len(relations_under(root)) == 10


def test_relation_keys_match_relations_under_for_every_node() -> None:
    for name in ("pg15/join_merge", "pg15/initplan_subquery", "rules/pg15/materialize"):
        parsed = plan(name)
        keys = relation_keys(parsed)
        for _, node in parsed.nodes():
            assert keys[id(node)] == relations_under(node)


def test_initplans_are_not_part_of_the_main_relations() -> None:
    parsed = plan("pg15/initplan_subquery")
    assert relations_under(parsed.root) == ("sbtest1",)


def test_early_stops_and_parallel_placement() -> None:
    limited = {p.node.node_type: p for p in placed_nodes(plan("pg15/incremental_sort"))}
    assert not limited["Limit"].early_stop
    assert limited["Incremental Sort"].early_stop and limited["Index Scan"].early_stop
    merge = [p for p in placed_nodes(plan("pg15/join_merge")) if p.node.node_type == "Index Scan"]
    assert merge and merge[0].early_stop
    parallel = {p.node.node_type: p for p in placed_nodes(plan("pg15/parallel_seq_scan"))}
    assert parallel["Seq Scan"].gather is not None and parallel["Gather"].gather is None


@pytest.mark.parametrize(
    ("workers", "divisor"), [(0, 1.0), (1, 1.7), (2, 2.4), (3, 3.1), (4, 4.0), (6, 6.0)]
)
def test_parallel_divisor_matches_postgresql(workers: int, divisor: float) -> None:
    assert parallel_divisor(workers) == pytest.approx(divisor)


def test_q_error_compares_parallel_totals_and_loops_per_loop() -> None:
    (worst, *_) = misestimates(plan("pg15/parallel_seq_scan"), 100)
    assert worst.label == "SeqScan(sbtest1)"
    assert worst.estimated == pytest.approx(8 * 2.4) and worst.actual == pytest.approx(300)
    # no workers launched: the leader's rows are the whole table's, against the same estimate
    (alone, *_) = misestimates(plan("rules/pg15/parallel_workers_not_launched"), 100)
    assert alone.actual == pytest.approx(301) and alone.q_error == pytest.approx(301 / 19.2)
    # 200000 inner loops of 0 or 1 rows (PG 15 rounds the per-loop average to 0): no error
    swapped = misestimates(plan("pg15/join_order_swapped"), 100)
    assert [m.label for m in swapped if m.q_error > 2] == ["NestedLoop"]


def test_facts_and_memo_are_per_plan_object() -> None:
    sort = plan("pg15/sort_external")
    assert facts(sort).sort_spilled and facts(sort).temp_blocks == 2083
    assert not facts(plan("pg15/sort_in_memory")).sort_spilled
    assert facts(plan("rules/pg15/index_only_heap_fetches")).max_heap_fetches == 4268
    assert facts(plan("rules/pg15/parallel_workers_not_launched")).workers_short
    calls: list[int] = []

    def compute(_plan: Plan, value: int) -> int:
        calls.append(value)
        return value

    assert memo(sort, compute, 42) == 42
    assert memo(sort, compute, 42) == 42 and calls == [42]
    assert memo(sort, compute, 43) == 43 and calls == [42, 43]
    before = len(matching._MEMO)
    del sort
    gc.collect()
    assert len(matching._MEMO) < before


def test_settings_compare_values_and_known_defaults() -> None:
    assert normalized("64MB") == normalized("65536kB") and normalized("4") == normalized("4.0")
    assert default_of("effective_io_concurrency", 170010) == "1"
    assert default_of("effective_io_concurrency", 180006) == "16"
    assert default_of("enable_partitionwise_join", None) == "off"
    assert default_of("enable_seqscan", None) == "on"
    assert fmt_version(150018) == "15.18" and fmt_version(90624) == "9.6.24"
    # random_page_cost = 4 set explicitly against an unset one: the same value
    same = settings_changes(
        side("rules/pg15/range_random_page_cost_4"), side("pg15/range_bitmap_scan", {})
    )
    assert "random_page_cost" not in {c.name for c in same}
    changed = settings_changes(
        side("rules/pg15/range_random_page_cost_4"), side("rules/pg15/range_random_page_cost_1_1")
    )
    assert [c.text() for c in changed] == ["random_page_cost 4 -> 1.1"]


def test_version_change_brings_moved_defaults() -> None:
    pg17, pg18 = side("pg17/join_nested_loop"), side("pg18/join_nested_loop")
    names = {c.name: c.text() for c in settings_changes(pg17, pg18)}
    assert names["effective_io_concurrency"] == (
        "effective_io_concurrency 1 (default) -> 16 (default)"
    )
    assert version_change(pg17, pg18) == "PostgreSQL 17.10 -> 18.6"
    assert version_change(pg17, pg17) is None


def _without_actuals(node: dict[str, Any]) -> dict[str, Any]:
    """A captured EXPLAIN ANALYZE node as plain EXPLAIN would print it (plan-only)."""
    kept = {k: v for k, v in node.items() if not k.startswith(("Actual", "Rows Removed"))}
    kept = {k: v for k, v in kept.items() if "Blocks" not in k and "I/O" not in k}
    if "Plans" in node:
        kept["Plans"] = [_without_actuals(child) for child in node["Plans"]]
    return kept


def test_scan_size_measured_and_estimated() -> None:
    measured = scan_size(plan("pg15/range_seq_scan"), "0.0")
    assert (measured.rows, measured.pages, measured.returned) == (200000, 7032, 2000)
    parallel = scan_size(plan("pg15/parallel_seq_scan"), "0.0.0.0")
    assert parallel.rows == pytest.approx(200000, rel=0.01) and parallel.pages == 7032
    raw = json.loads((PLANS / "pg15/range_seq_scan.json").read_text())["explain"][0]
    plan_only = parse_plan({"Plan": _without_actuals(raw["Plan"])})
    estimated = scan_size(plan_only, "0.0")
    assert not estimated.measured and estimated.returned is None
    assert estimated.rows == 1994 and estimated.pages == pytest.approx(10032.0)


def test_plan_settings_that_contradict_the_recorded_gucs_are_ignored() -> None:
    # an older store's one EXPLAIN per shape came from another target (enable_* off there)
    proposed = side("pg15/range_seq_scan", {"random_page_cost": "1.1"})
    current = side("pg15/range_seq_scan", {"random_page_cost": "4"})
    assert side_settings(proposed) == {"random_page_cost": "1.1"}
    assert [c.text() for c in settings_changes(current, proposed)] == ["random_page_cost 4 -> 1.1"]
    # consistent: the recorded GUCs are listed (or at their defaults), the list is used
    merged = side_settings(side("pg15/range_seq_scan", {"enable_indexscan": "off"}))
    assert merged["enable_bitmapscan"] == "off" and merged["jit"] == "off"


def test_near_tie_compares_the_costs_of_the_same_parameters() -> None:
    """Dominant plans whose median costs are far apart (they were planned for different
    parameter values) are still a near-tie when, parameter for parameter, both sides' plans
    cost within 2%; and the other way round."""
    from detector.model import QueryComparison, TimingComparison, Verdict
    from rules.common import near_tie

    def sided(label: str, costs: tuple[float, ...], dominant_cost: float) -> Side:
        parsed = plan("pg15/join_nested_loop")
        variant = PlanVariant(label, "s", parsed, len(costs), 1.0, dominant_cost)
        return Side(
            label,
            150018,
            {},
            (variant,),
            (1.0,) * len(costs),
            None,
            sample_indices=tuple(range(len(costs))),
            costs=costs,
        )

    timing = TimingComparison(Verdict.INCONCLUSIVE, 1.0, 0.9, 1.1, 0.5, 0.1, None, "r")
    per_sample = (100.0, 5000.0, 20000.0, 800.0, 300.0)

    def comparison(base: Side, cand: Side) -> QueryComparison:
        return QueryComparison("k", "q", "SELECT 1", base, cand, timing)

    tied = comparison(
        sided("a", per_sample, 300.0), sided("b", tuple(c * 1.01 for c in per_sample), 5050.0)
    )
    assert near_tie(tied, 0.02).tied
    apart = comparison(
        sided("a", per_sample, 800.0), sided("b", tuple(c * 1.5 for c in per_sample), 800.0)
    )
    assert not near_tie(apart, 0.02).tied
    unpaired = comparison(  # other runs: no common samples, the dominant plans decide
        sided("a", (), 800.0), sided("b", (), 805.0)
    )
    assert near_tie(unpaired, 0.02).tied


def test_same_plan_slower_names_server_level_settings() -> None:
    """What pairing gives the rules: the recorded server settings overlaid with the variant's
    GUCs, so io_method and shared_buffers are named beside effective_io_concurrency."""
    from detector.engine.comparison.query_pairs import side_settings_of
    from detector.model import QueryComparison, TimingComparison, Verdict
    from detector.model.records import TargetRecord
    from rules import RuleRunner

    def target(io_method: str) -> TargetRecord:
        info = {"settings": {"io_method": io_method, "shared_buffers": "16MB"}}
        return TargetRecord(1, 1, io_method, "embedded", 180006, {"work_mem": "4MB"}, info)

    plain = side("pg15/join_nested_loop")
    base = dataclasses.replace(plain, settings=side_settings_of(target("sync")))
    cand = dataclasses.replace(plain, settings=side_settings_of(target("worker")))
    timing = TimingComparison(Verdict.REGRESSED, 1.4, 1.3, 1.5, 0.001, 0.1, None, "r")
    comparison = QueryComparison("k", "q", "SELECT 1", base, cand, timing)
    (finding,) = [f for f in RuleRunner(select=("PS202",))(comparison)]
    assert "io_method sync -> worker" in finding.message
    assert side_settings_of(target("sync")) == {
        "io_method": "sync",
        "shared_buffers": "16MB",
        "work_mem": "4MB",
    }


def test_a_setting_a_version_does_not_have_is_not_available_not_default() -> None:
    from rules.gucs import SettingChange

    assert default_of("io_method", 170010) == "n/a"
    assert default_of("io_method", 180006) is None or default_of("io_method", 180006) != "n/a"
    change = SettingChange("io_method", None, "worker", "i/o", "n/a")
    assert change.text() == "io_method n/a (no such setting) -> worker"


def test_settings_explain_flip_says_when_the_test_of_the_cause_failed() -> None:
    from rules.causes import tested_text as _tested_text

    text = _tested_text({"error": "canceling statement due to statement timeout"}, [], None)
    assert text == (
        "the re-planning that tests the cause failed on the candidate "
        "(canceling statement due to statement timeout)"
    )
    assert _tested_text(
        {"tested": ["work_mem"], "restores": []}, [], "PostgreSQL 15.18 -> 17.10"
    ) == (
        "not the settings: with work_mem set back the candidate keeps its plan; "
        "the planner of PostgreSQL 15.18 -> 17.10"
    )


def test_why_a_side_did_not_jit() -> None:
    """PS111's reason, on a plan a build without JIT ran with jit on and every threshold 0:
    the settings first (recorded GUCs that contradict the plan's list win), then the cost
    threshold, then the server."""
    from rules.ps111_jit_lost import CANNOT, why_not

    requested = "rules/pg17/jit_requested"
    assert why_not(side(requested), "candidate")[0] == CANNOT
    assert why_not(side(requested, {"jit": "off"}), "candidate") == (
        "jit off",
        "jit is off on the candidate",
    )
    assert why_not(side(requested, {"jit_above_cost": "-1"}), "baseline")[0] == "jit disabled"
    reason, text = why_not(side(requested, {"jit_above_cost": "100000"}), "candidate")
    assert reason == "below jit_above_cost"
    assert "costs 11024.6, below jit_above_cost 100000" in text
