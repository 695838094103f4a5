"""The rule catalog's own captured plans (tests/fixtures/plans/rules/pg*/, the RULE_SCENARIOS of
tests/fixtures/capture_plans.py) keep their promises, and the case generator reproduces the
committed case files (tests/fixtures/rules/<CODE>/*.toml)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from detector.model import Plan, PlanNode, fingerprint, parse_plan

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RULE_PLANS = FIXTURES / "plans" / "rules"
CASES = FIXTURES / "rules"
VERSIONS = ("pg15", "pg17", "pg18")
FIXTURE_KEYS = {"scenario", "description", "server_version_num", "gucs", "sql", "explain"}


def _module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _scenarios() -> list[Any]:
    pytest.importorskip("psycopg")
    return list(_module(FIXTURES / "capture_plans.py", "capture_plans").RULE_SCENARIOS)


def load(version: str, scenario: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((RULE_PLANS / version / f"{scenario}.json").read_text())
    return document


def plan(version: str, scenario: str) -> Plan:
    return parse_plan(load(version, scenario)["explain"])


def nodes(p: Plan, node_type: str) -> list[PlanNode]:
    return [node for _, node in p.nodes() if node.node_type == node_type]


def test_every_rule_scenario_on_every_version() -> None:
    names = {s.name for s in _scenarios()}
    environment = json.loads((RULE_PLANS / "capture_environment.json").read_text())
    for version in VERSIONS:
        captured = {p.stem for p in (RULE_PLANS / version).glob("*.json")}
        assert captured | set(environment[version]["skipped"]) == names, version
        assert environment[version]["unexpected_plans"] == []


@pytest.mark.parametrize(
    "path", sorted(RULE_PLANS.glob("pg*/*.json")), ids=lambda p: f"{p.parent.name}/{p.stem}"
)
def test_rule_fixture_parses(path: Path) -> None:
    document = json.loads(path.read_text())
    assert set(document) == FIXTURE_KEYS and document["scenario"] == path.stem
    assert document["server_version_num"] // 10000 == int(path.parent.name.removeprefix("pg"))
    parsed = parse_plan(document["explain"])
    assert parsed.analyzed and parsed.execution_ms is not None and parsed.planning_ms is not None


@pytest.mark.parametrize("version", VERSIONS)
class TestPromises:
    def test_random_page_cost_flips_bitmap_to_index(self, version: str) -> None:
        assert nodes(plan(version, "range_random_page_cost_4"), "Bitmap Heap Scan")
        assert nodes(plan(version, "range_random_page_cost_1_1"), "Index Scan")

    def test_effective_io_concurrency_same_plan_same_cost(self, version: str) -> None:
        high, low = plan(version, "range_bitmap_eic_100"), plan(version, "range_bitmap_eic_1")
        assert fingerprint(high) == fingerprint(low) and high.total_cost == low.total_cost
        assert high.settings["effective_io_concurrency"] == "100"

    def test_workers_not_launched(self, version: str) -> None:
        (gather,) = nodes(plan(version, "parallel_workers_not_launched"), "Gather")
        assert gather.workers_planned == 2 and gather.workers_launched == 0

    def test_extended_statistics_fix_the_estimate(self, version: str) -> None:
        (scan,) = nodes(plan(version, "estimate_extended_stats"), "Seq Scan")
        assert scan.actual_rows is not None
        assert 0.5 < scan.plan_rows / scan.actual_rows < 2

    def test_incremental_sort_off(self, version: str) -> None:
        p = plan(version, "incremental_sort_off")
        assert nodes(p, "Sort") and not nodes(p, "Incremental Sort")

    def test_materialize_only_when_enabled(self, version: str) -> None:
        assert nodes(plan(version, "materialize"), "Materialize")
        assert not nodes(plan(version, "no_materialize"), "Materialize")

    def test_star_join_planning_grows_with_join_collapse_limit(self, version: str) -> None:
        narrow, wide = plan(version, "star_join"), plan(version, "star_join_collapse_12")
        assert fingerprint(narrow) == fingerprint(wide)
        assert narrow.planning_ms is not None and wide.planning_ms is not None
        assert wide.planning_ms > 2 * narrow.planning_ms

    def test_partial_aggregation_dropped_with_the_gather_kept(self, version: str) -> None:
        partial = plan(version, "partial_aggregate")
        (pre,) = [n for _, n in partial.nodes() if n.partial_mode == "Partial"]
        assert pre.strategy == "Hashed"
        assert nodes(partial, "Gather Merge")
        dropped = plan(version, "partial_aggregate_dropped")
        assert not [n for _, n in dropped.nodes() if n.partial_mode == "Partial"]
        assert nodes(dropped, "Gather") or nodes(dropped, "Gather Merge")

    def test_jit_requested_compiles_only_where_jit_is_available(self, version: str) -> None:
        environment = json.loads((RULE_PLANS / "capture_environment.json").read_text())
        requested = plan(version, "jit_requested")
        assert requested.jit_used == environment[version]["jit_available"]
        assert load(version, "jit_requested")["gucs"]["jit_above_cost"] == "0"

    def test_index_only_scan_fetches_heap_tuples(self, version: str) -> None:
        (scan,) = nodes(plan(version, "index_only_heap_fetches"), "Index Only Scan")
        assert scan.heap_fetches and scan.actual_rows_total
        assert scan.heap_fetches >= scan.actual_rows_total


def test_case_generator_reproduces_the_case_files(tmp_path: Path) -> None:
    generator = _module(CASES / "gen_cases.py", "gen_cases")
    assert generator.main(["--out", str(tmp_path)]) == 0
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.glob("PS*/*.toml"))
    assert written, "the generator wrote no case"
    for relative in written:
        committed = CASES / relative
        assert committed.exists(), f"{relative} is generated but not committed"
        assert (tmp_path / relative).read_text() == committed.read_text(), relative
