"""Golden files for the text reports, rendered from the committed fixed store.

tests/fixtures/reports/store.duckdb was built once by make_store.py (a real run on PostgreSQL
15); timings differ on every run, so these tests never run a workload. After an intended change
of a format (or a rebuilt store) regenerate the files and review the diff:

    PLANSHIFT_UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_reports_golden.py
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import COMMITTED, fixed_store

from detector.engine.comparison.options import CompareOptions
from detector.jobs.compare import compare_from_store
from detector.model import ComparisonResult, Severity
from detector.reports import FORMATS, render

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "reports"
STORE = fixed_store()
GOLDEN = FIXTURES / "golden"
SCHEMA = (
    Path(__file__).resolve().parent.parent
    / "detector"
    / "reports"
    / "schema"
    / "report-v1.schema.json"
)
UPDATE = os.environ.get("PLANSHIFT_UPDATE_GOLDEN") == "1"
PAIRS = {"gate": ("current", "proposed"), "forced": ("indexscan", "seqscan")}
EXTENSIONS = {"json": "json", "markdown": "md", "junit": "xml", "github": "txt"}


# the goldens pin the report formats, not the rule catalog: a fixed set of rules, so adding a
# rule does not change them (a changed message of one of these rules does)
OPTIONS = CompareOptions(select=("PS100", "PS200", "PS201", "PS300"))


@pytest.fixture(scope="module")
def results() -> dict[str, ComparisonResult]:
    return {
        name: compare_from_store(STORE, base, cand, None, OPTIONS)
        for name, (base, cand) in PAIRS.items()
    }


def rounded(value: Any) -> Any:
    """JSON with floats at 10 significant digits: evidence floats are unrounded, and their last
    bits depend on how the statistics were summed (numpy or DuckDB), not on the report."""
    if isinstance(value, float):
        return float(f"{value:.10g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def check_golden(path: Path, text: str) -> None:
    if UPDATE or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if not UPDATE:
            pytest.fail(f"{path.name} did not exist and was written: review and commit it")
    expected = path.read_text()
    if path.suffix == ".json":
        text, expected = (json.dumps(rounded(json.loads(t)), indent=1) for t in (text, expected))
    assert text == expected, (
        f"{path.name} differs from the rendered report; if the change is intended, run "
        "PLANSHIFT_UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_reports_golden.py and review the diff"
    )


def test_the_fixture_store_is_small_and_committed() -> None:
    assert COMMITTED.exists(), "run tests/fixtures/reports/make_store.py"
    assert COMMITTED.stat().st_size < 1_000_000


@pytest.mark.parametrize("pair", sorted(PAIRS))
@pytest.mark.parametrize("fmt", sorted(EXTENSIONS))
def test_golden(results: dict[str, ComparisonResult], pair: str, fmt: str) -> None:
    text = render(fmt, results[pair], fail_on=Severity.ERROR)
    check_golden(GOLDEN / f"{pair}.{EXTENSIONS[fmt]}", text)


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_json_validates_against_the_schema(results: dict[str, ComparisonResult], pair: str) -> None:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    document = json.loads(render("json", results[pair]))
    jsonschema.Draft202012Validator(schema).validate(document)


def test_the_schema_rejects_a_broken_document(results: dict[str, ComparisonResult]) -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    document = json.loads(render("json", results["gate"]))
    document["queries"][0]["timing"]["verdict"] = "slower"
    del document["findings"][0]["severity"]
    errors = sorted(str(e.message) for e in validator.iter_errors(document))
    assert len(errors) == 2, errors


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_is_deterministic(results: dict[str, ComparisonResult], fmt: str) -> None:
    first = render(fmt, results["gate"])
    again = compare_from_store(STORE, *PAIRS["gate"], None, OPTIONS)
    assert render(fmt, again) == first


def test_junit_is_valid_and_fails_only_at_or_above_fail_on(
    results: dict[str, ComparisonResult],
) -> None:
    result = results["gate"]
    by_gate = {}
    for gate in (Severity.ERROR, Severity.WARNING, None):
        root = ET.fromstring(render("junit", result, fail_on=gate))
        cases = root.findall("./testsuite/testcase")
        assert len(cases) == len(result.queries)
        assert root.get("tests") == str(len(result.queries))
        failed = {c.get("name") for c in cases if c.find("failure") is not None}
        assert root.get("failures") == str(len(failed))
        by_gate[gate] = failed
    assert by_gate[None] == set()
    assert by_gate[Severity.ERROR] < by_gate[Severity.WARNING]
    assert "sweep_sum [n=10000]" in by_gate[Severity.ERROR]
    assert "point_select" not in by_gate[Severity.WARNING]  # an improvement is info


def test_markdown_links_every_table_row_to_its_details(
    results: dict[str, ComparisonResult],
) -> None:
    text = render("markdown", results["gate"])
    assert text.startswith("<!-- planshift-report -->\n")
    links = {
        line.split("](#")[1].split(")")[0] for line in text.splitlines() if "](#planshift-" in line
    }
    anchors = {
        line.split('name="')[1].split('"')[0] for line in text.splitlines() if '<a name="' in line
    }
    assert links and links == anchors
    assert text.count("<details>") == text.count("</details>") == len(anchors)


def test_github_annotations_are_one_line_each(results: dict[str, ComparisonResult]) -> None:
    lines = render("github", results["gate"], fail_on=Severity.ERROR).splitlines()
    commands = [line for line in lines if line.startswith("::")]
    assert len(commands) == len(results["gate"].findings)
    errors = [line for line in commands if line.startswith("::error ")]
    assert len(errors) == sum(f.severity is Severity.ERROR for f in results["gate"].findings)
    assert all("::" in line[2:] and "\n" not in line for line in commands)


def test_html_and_markdown_lead_with_what_matters(results: dict[str, ComparisonResult]) -> None:
    """Queries by their worst finding, then workload impact: errors first, unchanged last."""
    import re

    from detector.reports.common import by_importance, worst_severities
    from detector.reports.comparison.html import render_html
    from detector.reports.comparison.html_query import anchor

    result = results["gate"]
    order = by_importance(result)
    worst = worst_severities(result)
    ranks = [worst[i].rank if i in worst else -1 for i in order]
    assert ranks == sorted(ranks, reverse=True) and ranks[0] > ranks[-1]
    page = render_html(result, fail_on=None)
    shown = re.findall(r'<details class="query" id="([^"]+)"', page)
    assert shown == [anchor(result.queries[i]) for i in order]
    assert result.queries[order[0]].timing.verdict.value == "regressed"
