"""Hostile names, SQL and plan shapes through every report format (issue 10: report injection).

The committed fixture store is copied and its query names, SQL, target names, settings and
plan signatures are replaced with strings an attacker controls (a workload file, a production
log, a schema). Every report must stay well-formed and inert: strict XML, no raw HTML after a
CommonMark renderer, no terminal control character on stdout, one GitHub command per line.
"""

from __future__ import annotations

import json
import re
import shutil
import xml.dom.minidom
import xml.etree.ElementTree as ET
from pathlib import Path

import duckdb
import pytest
from helpers import COMMITTED, whole_page
from markdown_it import MarkdownIt
from rich.console import Console
from typer.testing import CliRunner

from detector.cli.app import app
from detector.engine.comparison.options import CompareOptions
from detector.jobs.census import census_from_store
from detector.jobs.compare import compare_from_store
from detector.model import ComparisonResult, Severity
from detector.reports import FORMATS, render, render_terminal_text
from detector.reports.census.html import render_census_html
from detector.reports.census.terminal import render_census
from detector.reports.escape import (
    for_xml,
    markdown_code,
    markdown_code_span,
    markdown_inline,
    single_line,
    visible,
)

TERMINAL = "q\x1b[2J\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07"
FENCE = "```\n<img src=x onerror=alert(1)>\n```"
CONTROL = "ctrl\x01\x02\x0b\x0c\x7f\x85"
WORKFLOW = "::error::x%0A"
SCRIPT = "a</script><script>alert(1)</script>"
MARKUP = "[/][bold]x"
HYPERLINK = "1.1\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"
MATH = "$\\undefinedmacro{x}$"

QUERY_NAMES = {"sweep_sum": TERMINAL, "range_sum": FENCE, "point_select": CONTROL}
QUERY_SQL = {
    "range_sum": f"SELECT 1\n{FENCE}\n",
    "sweep_sum": f"SELECT 2 -- {SCRIPT}\n````\n{TERMINAL}",
}
TARGET_NAMES = {"current": MARKUP, "proposed": SCRIPT, "indexscan": WORKFLOW, "seqscan": MATH}
PAIRS = {"gate": ("current", "proposed"), "forced": ("indexscan", "seqscan")}
SIGNATURE = (
    f"IndexScan(t t_pkey {SCRIPT} <img src=x onerror=alert(3)> {TERMINAL} {MARKUP} {WORKFLOW} a|b)"
)

FORBIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
VISIBLE = {TERMINAL: "q", FENCE: FENCE, CONTROL: "ctrl"}


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "store.duckdb"
    shutil.copyfile(COMMITTED, path)
    with duckdb.connect(str(path)) as db:
        for old, new in QUERY_NAMES.items():
            db.execute(f"UPDATE queries SET name = {quote(new)} WHERE name = {quote(old)}")
        for new_name, sql in QUERY_SQL.items():
            db.execute(
                f"UPDATE queries SET sql = {quote(sql)} WHERE name = {quote(QUERY_NAMES[new_name])}"
            )
        for old, new in TARGET_NAMES.items():
            db.execute(f"UPDATE targets SET name = {quote(new)} WHERE name = {quote(old)}")
        gucs = json.dumps({"random_page_cost": HYPERLINK, MARKUP: SCRIPT})
        db.execute(f"UPDATE targets SET gucs = {quote(gucs)} WHERE name = {quote(SCRIPT)}")
        db.execute(
            f"UPDATE plans SET signature = replace(signature, 'IndexScan(t t_pkey)', {quote(SIGNATURE)})"
        )
    return path


@pytest.fixture(scope="module")
def results(store: Path) -> dict[str, ComparisonResult]:
    return {
        name: compare_from_store(store, base, cand, None, CompareOptions())
        for name, (base, cand) in PAIRS.items()
    }


def controls(text: str) -> list[str]:
    return sorted(set(FORBIDDEN.findall(text)))


def test_the_store_is_hostile(results: dict[str, ComparisonResult]) -> None:
    gate = results["gate"]
    assert (gate.baseline, gate.candidate) == (MARKUP, SCRIPT)
    assert {q.query_name for q in gate.queries} == set(QUERY_NAMES.values())
    assert any(SIGNATURE in q.candidate.dominant.signature for q in gate.queries)
    assert any(SIGNATURE in f.message for f in gate.findings)
    assert gate.settings_diff["random_page_cost"][1] == HYPERLINK


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_junit_is_well_formed_and_keeps_the_visible_names(
    results: dict[str, ComparisonResult], pair: str
) -> None:
    text = render("junit", results[pair], fail_on=Severity.WARNING)
    xml.dom.minidom.parseString(text.encode())
    root = ET.fromstring(text)
    assert controls(text) == []
    classnames = {case.get("classname") for case in root.iter("testcase")}
    assert classnames == {f"planshift.{visible}" for visible in VISIBLE.values()}
    suite = root.find("testsuite")
    assert suite is not None
    base, cand = PAIRS[pair]
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["baseline"] == for_xml(TARGET_NAMES[base])
    assert properties["candidate"] == for_xml(TARGET_NAMES[cand])


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_markdown_renders_no_raw_html(results: dict[str, ComparisonResult], pair: str) -> None:
    text = render("markdown", results[pair], fail_on=Severity.ERROR)
    assert controls(text) == []
    html = MarkdownIt("commonmark").render(text)
    assert "<img" not in html and "&lt;img" in html
    assert "<script" not in html
    assert html.count("<details>") == html.count("</details>") > 0
    table = MarkdownIt("commonmark").enable("table").render(text)
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
    assert rows and all(row.count("<td") in (0, 6) for row in rows)
    codes = re.findall(r'<pre><code class="language-sql">(.*?)</code></pre>', html, re.S)
    assert len(codes) == html.count("<details>")
    if pair == "gate":
        assert any("&lt;img src=x onerror=alert(1)&gt;\n```" in code for code in codes)


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_the_terminal_report_has_no_control_characters(
    results: dict[str, ComparisonResult], pair: str
) -> None:
    text = render_terminal_text(results[pair], fail_on=Severity.ERROR)
    assert controls(text) == []
    for name in (TERMINAL, FENCE, CONTROL):
        assert single_line(name) in text
    base, cand = PAIRS[pair]
    assert single_line(TARGET_NAMES[base]) in text and single_line(TARGET_NAMES[cand]) in text


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_github_annotations_cannot_inject_commands(
    results: dict[str, ComparisonResult], pair: str
) -> None:
    result = results[pair]
    text = render("github", result, fail_on=Severity.ERROR)
    assert controls(text) == []
    lines = text.splitlines()
    assert len(lines) == len(result.findings) + 1
    assert all(re.match(r"::(error|warning|notice) title=[^:]*::", line) for line in lines[:-1])
    assert lines[-1].startswith("planshift ")
    assert all("::error::x%0A" not in line for line in lines[:-1])
    assert "::error::x%250A" in text


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_html_escapes_every_name(results: dict[str, ComparisonResult], pair: str) -> None:
    text = whole_page(render("html", results[pair], fail_on=Severity.ERROR))
    assert controls(text) == []
    assert "<img" not in text
    assert text.count("<script") == 1 and text.count("</script>") == 1
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in text or pair == "forced"


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_no_control_character_reaches_the_cli_stdout(store: Path, fmt: str) -> None:
    runner = CliRunner()
    for base, cand in PAIRS.values():
        args = ["compare", "--store", str(store), "-b", base, "-c", cand, "-f", fmt, "-v"]
        outcome = runner.invoke(app, args)
        assert outcome.exit_code in (0, 1), outcome.output
        assert controls(outcome.stdout) == []


def test_census_reports_are_inert(store: Path) -> None:
    censuses = census_from_store(store, None, None, [])
    buffer = Console(width=200, color_system=None, highlight=False, record=True)
    with buffer.capture() as captured:
        render_census(censuses, buffer)
    text = captured.get()
    assert controls(text) == [] and MARKUP in text
    page = render_census_html(censuses)
    assert controls(page) == [] and "<img" not in page and "<script" not in page


def test_visible_strips_sequences_and_controls() -> None:
    assert visible(TERMINAL) == "q"
    assert visible(CONTROL) == "ctrl"
    assert visible(HYPERLINK) == "1.1click"
    assert visible("a\x9b31mb\r\nc\td") == "ab\nc\td"
    assert visible("plain [n=100] é → x") == "plain [n=100] é → x"


def test_for_xml_drops_what_xml_forbids() -> None:
    assert for_xml("a\x00b\x1b[1mc\ud800d\ufffe") == "abcd"
    assert for_xml("<&>\n\t") == "<&>\n\t"


def test_markdown_code_fence_is_longer_than_any_backtick_run() -> None:
    assert markdown_code("SELECT 1", "sql") == "```sql\nSELECT 1\n```"
    assert markdown_code("a\n````\nb") == "`````\na\n````\nb\n`````"


def test_markdown_code_span() -> None:
    assert markdown_code_span("Aggregate > SeqScan(t)") == "`Aggregate > SeqScan(t)`"
    assert markdown_code_span("a`b") == "``a`b``"
    assert markdown_code_span("`a") == "`` `a ``"


@pytest.mark.parametrize(
    "benign",
    ["sweep_sum [n=10000]", "1.19x slower (95% CI 1.15-1.24)", "Aggregate > IndexScan(t t_pkey)",
     "random_page_cost 4 -> 1.1", "t_a_idx", "count(*) > 3"],
)  # fmt: skip
def test_markdown_inline_keeps_benign_text(benign: str) -> None:
    rendered = MarkdownIt("commonmark").renderInline(markdown_inline(benign))
    assert rendered == benign.replace("&", "&amp;").replace(">", "&gt;")
    if "*" not in benign:
        assert markdown_inline(benign) == benign


@pytest.mark.parametrize(
    "hostile",
    [FENCE, "![x](https://t.example/p.png)", "[click](javascript:alert(1))", "*bold* _em_ `c`",
     "<b>&amp;</b>", "a\\", "x]y[z", "a | b", "~~s~~"],
)  # fmt: skip
def test_markdown_inline_renders_literally(hostile: str) -> None:
    rendered = MarkdownIt("commonmark").renderInline(markdown_inline(hostile))
    literal = hostile.replace("\n", " ")
    expected = literal.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert rendered == expected.replace('"', "&quot;")
