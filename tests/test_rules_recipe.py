"""CONTRIBUTING.md's recipe for a new rule, followed: one rule file and one folder of cases,
nothing else edited.

A temporary checkout holds a copy of the installed rules package plus a toy rule file, and a
copy of the rule tests and their cases plus the toy's case folder (the other fixtures linked).
With that copy first on PYTHONPATH, `planshift rules` lists the toy and prints its file, and
the copied rule tests run its cases and check its documentation, as they do for every rule.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from rule_cases import CASES_DIR, ROOT, load_case

import rules
from detector.model import Severity

TOY = '''"""PS198 seq-scan-added: a toy rule, CONTRIBUTING.md's recipe followed by a test."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, Severity
from rules.base import rule


@rule("PS198", "seq-scan-added", "plan-flip", Severity.INFO, needs_plan_change=True)
def seq_scan_added(comparison: QueryComparison, options: Mapping[str, Any]) -> Iterator[Finding]:
    """The candidate reads a relation by Seq Scan that the baseline did not.

    ## What it flags
    A relation read by a Seq Scan in the candidate's plan and by no Seq Scan
    in the baseline's.

    ## Why it matters
    A toy: it shows that a rule is one file and one folder of cases.

    ## Example
        Seq Scan added on sbtest1

    ## What to do
    Nothing: read PS102 index-to-seq-scan instead.

    ## References
    - Using EXPLAIN: https://www.postgresql.org/docs/current/using-explain.html
    """
    def seq(side: Any) -> set[str]:
        return {
            node.relation or "?"
            for _, node in side.dominant.plan.nodes()
            if node.node_type == "Seq Scan"
        }

    added = sorted(seq(comparison.candidate) - seq(comparison.baseline))
    if added:
        message = "Seq Scan added on " + ", ".join(added)
        yield seq_scan_added.finding(comparison, message, {"relations": added})
'''
#: the case files the toy's cases start from: one where it fires, one where it does not
FIRES = CASES_DIR / "PS102" / "index_to_seq_regressed.toml"
SILENT = CASES_DIR / "PS100" / "same_shape_other_constants.toml"


def toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def with_toy_finding(case_text: str, message: str) -> str:
    """The case file with the toy's finding among the others, in report order."""
    head, _, _ = case_text.partition("\n[[findings]]")
    findings = [*tomllib.loads(case_text)["findings"]]
    findings.append({"code": "PS198", "severity": "info", "message": message})
    findings.sort(key=lambda f: (-Severity(f["severity"]).rank, f["code"], f["message"]))
    blocks = [
        "\n".join(f"{key} = {toml_string(f[key])}" for key in ("code", "severity", "message"))
        for f in findings
    ]
    return head.rstrip("\n") + "\n" + "".join(f"\n[[findings]]\n{b}\n" for b in blocks)


def checkout(tmp: Path) -> Path:
    """A checkout whose rules package and rule cases are copies with the toy added."""
    shutil.copytree(
        Path(rules.__file__).parent, tmp / "rules", ignore=shutil.ignore_patterns("__pycache__")
    )
    (tmp / "rules" / "ps198_seq_scan_added.py").write_text(TOY)
    (tmp / "tests" / "fixtures").mkdir(parents=True)
    for module in (ROOT / "tests").glob("*.py"):  # conftest and what it imports, the rule tests
        shutil.copy(module, tmp / "tests" / module.name)
    for entry in (ROOT / "tests" / "fixtures").iterdir():
        if entry.name != "rules":
            (tmp / "tests" / "fixtures" / entry.name).symlink_to(entry)
    cases = tmp / "tests" / "fixtures" / "rules"
    shutil.copytree(CASES_DIR, cases, ignore=shutil.ignore_patterns("__pycache__"))
    (cases / "PS198").mkdir()
    fires = with_toy_finding(FIRES.read_text(), "Seq Scan added on sbtest1")
    (cases / "PS198" / "index_to_seq_scan.toml").write_text(fires)
    shutil.copy(SILENT, cases / "PS198" / "same_plan.toml")
    wrong = with_toy_finding(FIRES.read_text(), "Seq Scan added on sbtest2")
    (cases / "PS198" / "wrong_relation.toml").write_text(wrong)
    (tmp / "pytest.ini").write_text("[pytest]\npythonpath = tests\nmarkers =\n    pg: PostgreSQL\n")
    return tmp


def run(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tmp)}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=tmp, env=env, timeout=600
    )


def test_a_rule_is_one_file_and_one_folder_of_cases(tmp_path: Path) -> None:
    assert load_case(FIRES).comparison.plan_changed and not load_case(SILENT).fires()
    tmp = checkout(tmp_path)
    listing = run(tmp, "-m", "detector", "rules")
    assert listing.returncode == 0, listing.stderr
    assert "PS198" in listing.stdout and "seq-scan-added" in listing.stdout
    shown = run(tmp, "-m", "detector", "rules", "PS198")
    assert shown.returncode == 0, shown.stderr
    assert "file: rules/ps198_seq_scan_added.py" in shown.stdout
    assert "What it flags" in shown.stdout
    tests = run(
        tmp,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        "-v",
        "-k",
        "PS198 or one_rule_per_file or helper_modules or code_twice or folders_name",
        "tests/test_rules.py",
        "tests/test_rules_fixtures.py",
    )
    out = tests.stdout
    # the toy's documentation and layout are checked like every rule's, its cases run, and a
    # case that expects the wrong message fails naming its file and the finding
    for passed in (
        "test_rule_is_documented_and_has_cases[PS198] PASSED",
        "test_case[PS198/index_to_seq_scan] PASSED",
        "test_case[PS198/same_plan] PASSED",
        "test_one_rule_per_file_named_by_its_code_and_name PASSED",
        "test_no_rule_writes_its_code_twice PASSED",
        "test_case_folders_name_registered_rules PASSED",
    ):
        assert passed in out, out
    assert "test_case[PS198/wrong_relation] FAILED" in out, out
    assert (
        "tests/fixtures/rules/PS198/wrong_relation.toml: finding" in out
        and "message expected 'Seq Scan added on sbtest2', got 'Seq Scan added on sbtest1'" in out
    ), out
    assert tests.returncode == 1 and " 1 failed" in out, out
