"""The rule cases (tests/fixtures/rules/<CODE>/*.toml, read by tests/rule_cases.py) hold: every
finding of each, code, severity and message. Their inputs are real: the rule catalog's captured
plans (tests/fixtures/plans/rules/pg*/, the RULE_SCENARIOS of tests/fixtures/capture_plans.py)
keep their promises, and the measured executions (tests/fixtures/plans/timings/, written by
tests/fixtures/capture_timings.py) are of the plans they sit beside."""

from __future__ import annotations

import importlib.util
import json
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from rule_cases import CASES_DIR, ROOT, Case, case_files, check, load_case

import rules
from detector.model import Finding, Plan, PlanNode, fingerprint, parse_plan

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RULE_PLANS = FIXTURES / "plans" / "rules"
TIMINGS = FIXTURES / "plans" / "timings"
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


def run(case: Case) -> list[Finding]:
    return rules.run_rules(case.comparison, options={case.code: case.options})


@pytest.mark.parametrize("path", case_files(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_case(path: Path) -> None:
    case = load_case(path)
    assert case.description, f"{case.name}: every case says what it is"
    findings = run(case)
    problems = check(case, findings)
    assert not problems, "\n".join(problems)
    for found in findings:
        assert "\n" not in found.message
        assert found.query_key == case.comparison.query_key
        json.dumps(found.evidence, sort_keys=True)  # evidence is plain JSON
    assert findings == sorted(findings, key=Finding.sort_key)


def test_case_folders_name_registered_rules() -> None:
    codes = {r.code for r in rules.all_rules()}
    folders = [p for p in CASES_DIR.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert folders
    for folder in folders:
        assert folder.name in codes, f"{folder} is not a rule code"
    assert not list(CASES_DIR.glob("*.py")), "the cases are written by hand, not generated"


def test_a_failing_case_names_its_file_and_the_expectation(tmp_path: Path) -> None:
    original = CASES_DIR / "PS200" / "flip_regressed.toml"
    case = load_case(original)
    assert case.findings, "the case this test edits expects findings"
    findings = run(case)
    assert check(case, findings) == []
    wrong = dict(case.findings[-1], message=case.findings[-1]["message"] + "!")
    edited = Case(
        case.path,
        case.code,
        case.description,
        case.options,
        [*case.findings[:-1], wrong],
        case.comparison,
    )
    n = len(case.findings)
    assert check(edited, findings) == [
        f"tests/fixtures/rules/PS200/flip_regressed.toml: finding {n} ({wrong['code']}): message "
        f"expected {wrong['message']!r}, got {findings[-1].message!r}"
    ]
    missing = Case(
        case.path, case.code, case.description, case.options, case.findings[:-1], case.comparison
    )
    assert check(missing, findings)[0].startswith(
        f"tests/fixtures/rules/PS200/flip_regressed.toml: finding {n} made, not expected: "
    )
    broken = tmp_path / "PS200" / "broken.toml"
    broken.parent.mkdir()
    broken.write_text(original.read_text().replace("[baseline]", "[baseline]\nplna = 1"))
    with pytest.raises(ValueError, match=r"broken.toml: \[baseline\] has unknown keys \['plna'\]"):
        load_case(broken)


def test_measured_executions_are_of_the_plan_beside_them() -> None:
    environment = json.loads((TIMINGS / "capture_environment.json").read_text())
    files = sorted(TIMINGS.rglob("pg*/*.json"))
    assert files
    for path in files:
        record = json.loads(path.read_text())
        plan_path = FIXTURES / "plans" / path.relative_to(TIMINGS)
        version = path.parent.name
        assert record["scenario"] == path.stem and plan_path.exists(), path
        captured = parse_plan(json.loads(plan_path.read_text())["explain"])
        assert record["fingerprint"] == fingerprint(captured), path
        assert record["server_version_num"] // 10000 == int(version.removeprefix("pg"))
        executions = environment[version]["executions"]
        assert len(record["execution_ms"]) == len(record["planning_ms"]) == executions, path
        assert all(ms > 0 for ms in record["execution_ms"] + record["planning_ms"]), path


def test_cases_name_the_measured_executions_of_their_own_plans() -> None:
    """A side's measured durations are its own plan's, or the baseline's where a case needs
    the two sides to take the same time (its description says so); durations written out are
    the exception, and the description says why."""
    for path in case_files():
        raw = tomllib.loads(path.read_text())
        description = raw["description"]
        for label in ("baseline", "candidate"):
            side = raw[label]
            for entry in side.get("plans", [side]):
                plan, durations = entry.get("plan", entry.get("fixture")), entry.get("durations_ms")
                if plan is None:
                    continue
                if not isinstance(durations, str):
                    assert "durations written out" in description, f"{path}: say why"
                    continue
                assert (ROOT / durations).exists(), f"{path}: {durations}"
                own = plan.replace("tests/fixtures/plans/", "tests/fixtures/plans/timings/", 1)
                if durations != own:
                    assert label == "candidate" and durations == raw["baseline"]["durations_ms"]
                    assert "the baseline's executions on both sides" in description, path
