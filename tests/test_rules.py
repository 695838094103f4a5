"""The rule catalog: every rule documented, found by its file name, with cases; the framework.

The cases themselves (tests/fixtures/rules/<CODE>/<case>.toml, read by tests/rule_cases.py)
run in tests/test_rules_fixtures.py.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from typing import Any

import pytest
from rule_cases import CASES_DIR, ROOT, case_files, load_case

import rules
from detector.model import (
    Finding,
    QueryComparison,
    ScanAccess,
    Severity,
)
from detector.model.units import fmt_duration, fmt_ratio
from rules import base
from rules.common import relative_gap
from rules.ps101_index_to_bitmap_scan import index_to_bitmap_pairs

DOCS_URL = re.compile(
    r"https://www\.postgresql\.org/docs/current/([a-z0-9-]+\.html)(?:#[A-Z0-9-]+)?"
)
#: the PostgreSQL documentation pages the rule docs cite (docs/current/<page>): a typo fails
DOCS_PAGES = {
    "auto-explain.html",
    "errcodes-appendix.html",
    "explicit-joins.html",
    "functions-info.html",
    "how-parallel-query-works.html",
    "indexes-bitmap-scans.html",
    "indexes-index-only-scans.html",
    "jit-decision.html",
    "jit.html",
    "parallel-plans.html",
    "parallel-query.html",
    "pgstatstatements.html",
    "planner-optimizer.html",
    "planner-stats.html",
    "routine-vacuuming.html",
    "row-estimation-examples.html",
    "runtime-config-logging.html",
    "runtime-config-query.html",
    "runtime-config-resource.html",
    "runtime-config-statistics.html",
    "sql-analyze.html",
    "sql-createstatistics.html",
    "sql-explain.html",
    "sql-prepare.html",
    "upgrading.html",
    "storage-vm.html",
    "using-explain.html",
    "view-pg-settings.html",
}


@pytest.mark.parametrize("rule", rules.all_rules(), ids=lambda r: r.code)
def test_rule_is_documented_and_has_cases(rule: rules.Rule) -> None:
    sections = rule.sections()
    for heading in rules.DOC_SECTIONS:
        assert sections.get(heading), f"{rule.code} doc lacks '## {heading}'"
    assert rule.summary and not rule.summary.startswith("##")
    wide = [line for line in rule.doc.splitlines() if len(line) > 78]
    assert not wide, f"{rule.code} doc lines over 78 columns (planshift rules wraps them)"
    assert rule.code.startswith(rules.FAMILIES[rule.family])
    assert not re.search(r"\bseeds?\b", rule.doc, re.IGNORECASE), "internal seed documents"
    cited = DOCS_URL.findall(sections["References"])
    assert cited, f"{rule.code} References cite no PostgreSQL documentation page"
    assert len(cited) == sections["References"].count("https://"), "only postgresql.org docs"
    unknown = sorted({page for page in cited if page not in DOCS_PAGES})
    assert not unknown, f"{rule.code} cites pages not in DOCS_PAGES (a typo?): {unknown}"
    cases = [load_case(path) for path in sorted((CASES_DIR / rule.code).glob("*.toml"))]
    firing = [case for case in cases if case.fires()]
    assert firing, f"{rule.code} has no case that fires (tests/fixtures/rules/{rule.code}/)"
    assert len(firing) < len(cases), f"{rule.code} has no case that does not fire"
    assert rule.file == f"rules/{rule.code.lower()}_{rule.name.replace('-', '_')}.py"
    assert (ROOT / rule.file).is_file() or rule.file.startswith("/"), rule.file


def test_rule_messages_never_cite_internal_seed_documents() -> None:
    for path in case_files():
        for found in load_case(path).findings:
            assert not re.search(r"\bseeds?\b", found["message"], re.IGNORECASE), found


# --- the layout: where is PS101? -------------------------------------------------------------


def test_one_rule_per_file_named_by_its_code_and_name() -> None:
    """Where is PS402? In rules/ps402_hash_batches.py, and nowhere else."""
    assert not list((ROOT / "rules").glob("*/__init__.py")), "no subpackage: one flat catalog"
    by_module = {r.check.__module__.removeprefix("rules."): r for r in rules.all_rules()}
    assert len(by_module) == len(rules.all_rules()), "one rule per file"
    assert sorted(by_module) == rules.rule_modules()
    for module, found in by_module.items():
        assert module == f"{found.code.lower()}_{found.name.replace('-', '_')}", module


def test_helper_modules_register_no_rule_and_no_rule_file_is_misnamed() -> None:
    """A file that looks like a rule but does not match the pattern would never be imported."""
    for path in sorted((ROOT / "rules").glob("*.py")):
        if path.stem == "__init__" or rules.RULE_MODULE.match(path.stem):
            continue
        assert not re.match(r"(?i)ps\d", path.stem), f"{path.name}: name it ps<code>_<name>.py"
        module = importlib.import_module(f"rules.{path.stem}")
        here = [r.code for r in rules.all_rules() if r.check.__module__ == module.__name__]
        assert not here, f"helper module {path.name} registers {here}"


def test_rule_modules_are_discovered_by_their_file_names() -> None:
    listed = rules.rule_modules()
    on_disk = sorted(
        p.stem for p in (ROOT / "rules").glob("ps*.py") if rules.RULE_MODULE.match(p.stem)
    )
    assert listed == on_disk and "ps101_index_to_bitmap_scan" in listed
    assert rules.RULE_MODULE.match("ps110_partial_aggregation_changed")
    wrong = ("PS110_x", "ps11_x", "ps110-x", "ps110", "plan_flip", "ps110_X", "ps401_ps403_spills")
    for name in wrong:
        assert not rules.RULE_MODULE.match(name), name


def test_no_rule_writes_its_code_twice() -> None:
    """A rule's code is in its decorator and its file name; findings come from
    `<rule>.finding(...)`, never from a code string."""
    for path in sorted((ROOT / "rules").glob("*.py")):
        codes = [
            node.value
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and re.fullmatch(r"PS\d{3}", node.value)
        ]
        expected = [path.stem[:5].upper()] if rules.RULE_MODULE.match(path.stem) else []
        assert codes == expected, f"{path.name} has code strings {codes}"


# --- the framework -----------------------------------------------------------------------


def test_registry_is_sorted_and_lookups_work() -> None:
    codes = [r.code for r in rules.all_rules()]
    assert codes == sorted(codes)
    assert {"PS100", "PS101", "PS200", "PS201", "PS300"} <= set(codes)
    assert rules.get_rule("ps101").name == "index-to-bitmap-scan"
    assert rules.get_rule("index-to-bitmap-scan").code == "PS101"
    assert rules.get_rule("PS101").summary.startswith("A relation read by Index Scan")


def test_unknown_rule_suggests_close_matches() -> None:
    with pytest.raises(LookupError, match="unknown rule 'index-to-bitmap'") as info:
        rules.get_rule("index-to-bitmap")
    assert "index-to-bitmap-scan" in str(info.value)
    with pytest.raises(rules.RuleConfigError) as close:
        rules.get_rule("PS10")
    assert close.value.hint and re.search(r"PS10\d", close.value.hint)


def test_selectors_prefix_family_name_and_ignore() -> None:
    def codes(**kw: Any) -> list[str]:
        return [r.code for r in rules.select_rules(**kw)]

    assert codes() == [r.code for r in rules.all_rules()]
    every = codes()
    assert codes(select=["PS1"]) == [c for c in every if c.startswith("PS1")]
    assert {"PS100", "PS101"} <= set(codes(select=["PS1"]))
    assert codes(select=["timing"]) == [c for c in every if c.startswith("PS2")]
    kept = codes(select=["ALL"], ignore=["PS2", "index-to-bitmap-scan"])
    assert kept == [c for c in every if not c.startswith("PS2") and c != "PS101"]
    assert "PS100" in kept and "PS300" in kept
    assert codes(select=["PS101"], ignore=["plan-flip"]) == []
    with pytest.raises(LookupError, match="matches no rule"):
        codes(select=["PS9"])


def test_option_overrides_are_validated() -> None:
    ps100 = rules.get_rule("PS100")
    assert ps100.resolve_options() == {"near_tie": 0.02}
    assert ps100.resolve_options({"near_tie": 1}) == {"near_tie": 1.0}
    with pytest.raises(LookupError, match="no option 'near_ti'") as info:
        ps100.resolve_options({"near_ti": 0.1})
    assert "near_tie" in str(info.value)
    with pytest.raises(LookupError, match="must be float"):
        ps100.resolve_options({"near_tie": "small"})
    with pytest.raises(LookupError, match="must be float"):
        ps100.resolve_options({"near_tie": True})


def test_registration_checks_code_name_family_and_clashes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    with pytest.raises(ValueError, match="not PS"):
        rules.rule("X100", "x", "plan-flip", Severity.INFO)
    with pytest.raises(ValueError, match="kebab-case"):
        rules.rule("PS190", "Bad_Name", "plan-flip", Severity.INFO)
    with pytest.raises(ValueError, match="family"):
        rules.rule("PS290", "some-flip", "plan-flip", Severity.INFO)
    with pytest.raises(ValueError, match="clashes"):
        rules.rule("PS190", "plan-shape-changed", "plan-flip", Severity.INFO)(lambda c, o: [])

    @rules.rule("PS199", "test-only", "plan-flip", Severity.INFO, flag=True)
    def test_only(comparison: QueryComparison, options: Any) -> list[Finding]:
        """Test rule."""
        return [rules.get_rule("PS100").finding(comparison, "wrong code", {})]

    assert rules.get_rule("PS199").options == {"flag": True}
    comparison = load_case(next(iter(sorted((CASES_DIR / "PS100").glob("*.toml"))))).comparison
    with pytest.raises(RuntimeError, match="PS199 emitted a finding coded PS100"):
        rules.run_rules(comparison, select=["PS199"])


def test_rules_import_only_the_model_the_error_type_and_the_standard_library() -> None:
    allowed_stdlib = set(sys.stdlib_module_names) | {"__future__"}
    for module in sorted((ROOT / "rules").glob("*.py")):
        tree = ast.parse(module.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                ok = (
                    top in allowed_stdlib
                    or top == "rules"
                    or name.startswith("detector.model")
                    or name == "detector.errors"
                )
                assert ok, f"{module.name} imports {name}"


def test_index_to_bitmap_pairs_match_by_relation_and_index() -> None:
    def access(rel: str, node: str, index: str | None, path: str) -> ScanAccess:
        return ScanAccess(rel, node, index, path)

    # a self-join: one read keeps its Index Scan, the other (on k_1) becomes a bitmap scan
    before = [
        access("sbtest1", "Index Scan", "sbtest1_pkey", "0.0"),
        access("sbtest1", "Index Only Scan", "k_1", "0.1"),
        access("sbtest2", "Index Scan", "sbtest2_pkey", "0.2"),
    ]
    after = [
        access("sbtest2", "Seq Scan", None, "0.0.0"),
        access("sbtest1", "Bitmap Heap Scan", "k_1", "0.0.1"),
        access("sbtest1", "Index Scan", "sbtest1_pkey", "0.1"),
    ]
    pairs = index_to_bitmap_pairs(before, after)
    assert [(old.path, new.path) for old, new in pairs] == [("0.1", "0.0.1")]
    # a BitmapOr over two indexes still pairs with the index it contains
    ored = [access("sbtest1", "Bitmap Heap Scan", "k_1,sbtest1_pkey", "0")]
    pairs = index_to_bitmap_pairs(before[:1], ored)
    assert [(old.index_name, new.index_name) for old, new in pairs] == [
        ("sbtest1_pkey", "k_1,sbtest1_pkey")
    ]


def test_number_formatting() -> None:
    assert [fmt_duration(v) for v in (0.004, 0.4, 2.1, 14.6, 101.9, None)] == [
        "0.0040 ms",
        "0.400 ms",
        "2.10 ms",
        "14.6 ms",
        "102 ms",
        "?",
    ]
    assert fmt_ratio(0.966) == "0.97" and fmt_ratio(0.9962) == "0.996" and fmt_ratio(1.0) == "1.00"
    assert relative_gap(4703.7, 4475.5) == pytest.approx(0.0485, abs=1e-4)
    assert relative_gap(0.0, 0.0) == 0.0


def test_rules_declared_plan_change_only_never_fire_on_the_same_plan() -> None:
    """`needs_plan_change` lets the runner skip a rule: check the declaration is true."""
    for path in case_files():
        comparison = load_case(path).comparison
        if comparison.plan_changed:
            continue
        for selected in rules.all_rules():
            if selected.needs_plan_change:
                assert not list(selected.check(comparison, selected.resolve_options())), (
                    selected.code,
                    path.name,
                )
