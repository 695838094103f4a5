"""The captured plan fixtures (tests/fixtures/plans/pg*/): they parse, show what their names
promise, and fingerprint equal exactly when the plan shape is the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from detector.model import Plan, PlanNode, fingerprint, parse_plan

PLANS = Path(__file__).resolve().parent / "fixtures" / "plans"
VERSIONS = ("pg15", "pg17", "pg18")
FIXTURE_KEYS = {"scenario", "description", "server_version_num", "gucs", "sql", "explain"}
SCENARIOS = sorted(p.stem for p in (PLANS / "pg15").glob("*.json"))
NODE_PROMISES = {
    "range_index_scan": "Index Scan",
    "range_index_scan_other_constants": "Index Scan",
    "range_index_scan_alias": "Index Scan",
    "range_bitmap_scan": "Bitmap Heap Scan",
    "range_seq_scan": "Seq Scan",
    "range_bitmap_lossy": "Bitmap Heap Scan",
    "index_only_scan": "Index Only Scan",
    "index_only_to_index_scan": "Index Scan",
    "join_nested_loop": "Nested Loop",
    "join_hash": "Hash Join",
    "join_merge": "Merge Join",
    "join_order_swapped": "Nested Loop",
    "sort_in_memory": "Sort",
    "sort_external": "Sort",
    "hash_join_batches": "Hash",
    "hash_aggregate": "Aggregate",
    "group_aggregate": "Aggregate",
    "incremental_sort": "Incremental Sort",
    "memoize": "Memoize",
    "no_memoize": "Nested Loop",
    "parallel_seq_scan": "Gather",
    "serial_seq_scan": "Seq Scan",
    "jit_used": "Seq Scan",
    "jit_off": "Seq Scan",
    "disabled_seq_scan": "Seq Scan",
    "estimate_error": "Seq Scan",
    "initplan_subquery": "Index Scan",
    "update_rolled_back": "ModifyTable",
}


def fixture_paths() -> list[Path]:
    return sorted(PLANS.glob("pg*/*.json"))


def load(version: str, scenario: str) -> dict[str, Any]:
    path = PLANS / version / f"{scenario}.json"
    if not path.exists():
        skipped = json.loads((PLANS / "capture_environment.json").read_text())[version]["skipped"]
        if scenario in skipped:
            pytest.skip(f"{version} {scenario}: {skipped[scenario]}")
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def plan(version: str, scenario: str) -> Plan:
    return parse_plan(load(version, scenario)["explain"])


def nodes(p: Plan, node_type: str) -> list[PlanNode]:
    return [node for _, node in p.nodes() if node.node_type == node_type]


def test_every_scenario_on_every_version() -> None:
    assert set(SCENARIOS) == set(NODE_PROMISES)
    environment = json.loads((PLANS / "capture_environment.json").read_text())
    for version in VERSIONS:
        captured = {p.stem for p in (PLANS / version).glob("*.json")}
        assert captured | set(environment[version]["skipped"]) == set(NODE_PROMISES), version
        assert environment[version]["unexpected_plans"] == []


@pytest.mark.parametrize("path", fixture_paths(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_parses_and_keeps_its_promise(path: Path) -> None:
    document = json.loads(path.read_text())
    assert set(document) == FIXTURE_KEYS
    assert document["scenario"] == path.stem
    assert document["server_version_num"] // 10000 == int(path.parent.name.removeprefix("pg"))
    assert path.stat().st_size < 16_000
    parsed = parse_plan(document["explain"])
    assert parsed.analyzed and parsed.execution_ms is not None
    assert nodes(parsed, NODE_PROMISES[path.stem]), f"no {NODE_PROMISES[path.stem]} node"
    for name, value in document["gucs"].items():
        if name.startswith("enable_"):
            assert parsed.settings.get(name) == value


@pytest.mark.parametrize("version", VERSIONS)
class TestPerVersion:
    def test_bitmap_lossy(self, version: str) -> None:
        (heap,) = nodes(plan(version, "range_bitmap_lossy"), "Bitmap Heap Scan")
        assert heap.lossy_heap_blocks and heap.lossy_heap_blocks > 0
        (exact,) = nodes(plan(version, "range_bitmap_scan"), "Bitmap Heap Scan")
        assert exact.lossy_heap_blocks == 0

    def test_sorts(self, version: str) -> None:
        (external,) = nodes(plan(version, "sort_external"), "Sort")
        assert external.sort_method == "external merge" and external.buffers.temp_written > 0
        (in_memory,) = nodes(plan(version, "sort_in_memory"), "Sort")
        assert in_memory.sort_method == "quicksort" and in_memory.sort_space_type == "Memory"

    def test_hash_batches(self, version: str) -> None:
        (spilled,) = nodes(plan(version, "hash_join_batches"), "Hash")
        assert spilled.hash_batches and spilled.hash_batches > 1
        (single,) = nodes(plan(version, "join_hash"), "Hash")
        assert single.hash_batches == 1

    def test_aggregate_strategies(self, version: str) -> None:
        assert plan(version, "hash_aggregate").root.strategy == "Hashed"
        assert plan(version, "group_aggregate").root.strategy == "Sorted"

    def test_index_only_scan_without_heap_fetches(self, version: str) -> None:
        (scan,) = nodes(plan(version, "index_only_scan"), "Index Only Scan")
        assert scan.heap_fetches == 0
        assert not nodes(plan(version, "index_only_to_index_scan"), "Index Only Scan")

    def test_memoize_only_when_enabled(self, version: str) -> None:
        assert not nodes(plan(version, "no_memoize"), "Memoize")

    def test_parallelism(self, version: str) -> None:
        (gather,) = nodes(plan(version, "parallel_seq_scan"), "Gather")
        assert gather.workers_planned and gather.workers_planned > 0
        assert not nodes(plan(version, "serial_seq_scan"), "Gather")

    def test_jit(self, version: str) -> None:
        assert not plan(version, "jit_off").jit_used
        assert plan(version, "jit_used").jit_used

    def test_disabled_seq_scan(self, version: str) -> None:
        parsed = plan(version, "disabled_seq_scan")
        (scan,) = nodes(parsed, "Seq Scan")
        assert scan.disabled
        raw_cost = load(version, "disabled_seq_scan")["explain"][0]["Plan"]["Total Cost"]
        assert (raw_cost >= 1e10) == (version != "pg18")
        assert parsed.total_cost < 1e10

    def test_estimate_error_over_10x(self, version: str) -> None:
        (scan,) = nodes(plan(version, "estimate_error"), "Seq Scan")
        assert scan.actual_rows is not None
        assert scan.actual_rows > 10 * scan.plan_rows

    def test_initplan(self, version: str) -> None:
        names = {node.subplan_name for _, node in plan(version, "initplan_subquery").nodes()}
        assert {"InitPlan 1", "InitPlan 2"} <= names

    def test_update_was_executed(self, version: str) -> None:
        fixture = load(version, "update_rolled_back")
        root = parse_plan(fixture["explain"]).root
        assert fixture["sql"].startswith("UPDATE") and root.actual_loops == 1
        assert fixture["explain"][0]["Plan"]["Operation"] == "Update"

    def test_same_shape_same_fingerprint(self, version: str) -> None:
        base = fingerprint(plan(version, "range_index_scan"))
        assert fingerprint(plan(version, "range_index_scan_other_constants")) == base
        assert fingerprint(plan(version, "range_index_scan_alias")) == base
        assert fingerprint(plan(version, "hash_join_batches")) == fingerprint(
            plan(version, "join_hash")
        )
        assert fingerprint(plan(version, "sort_external")) == fingerprint(
            plan(version, "sort_in_memory")
        )

    @pytest.mark.parametrize(
        ("a", "b"),
        [
            ("range_index_scan", "range_bitmap_scan"),
            ("range_index_scan", "range_seq_scan"),
            ("index_only_scan", "index_only_to_index_scan"),
            ("join_nested_loop", "join_hash"),
            ("join_hash", "join_merge"),
            ("join_nested_loop", "join_order_swapped"),
            ("hash_aggregate", "group_aggregate"),
            ("memoize", "no_memoize"),
            ("parallel_seq_scan", "serial_seq_scan"),
        ],
    )
    def test_different_shape_different_fingerprint(self, version: str, a: str, b: str) -> None:
        assert fingerprint(plan(version, a)) != fingerprint(plan(version, b))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_fingerprint_stable_across_versions(scenario: str) -> None:
    """Every scenario's plan has the same shape on 15, 17 and 18, so one fingerprint."""
    prints = {}
    for version in VERSIONS:
        if (PLANS / version / f"{scenario}.json").exists():
            prints[version] = fingerprint(plan(version, scenario))
    assert len(set(prints.values())) == 1, prints
