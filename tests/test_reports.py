"""Report building blocks: output resolution, plan diff alignment, sweep crossings, the CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import fixed_store, whole_page

from detector.engine.sweeps import crossings
from detector.errors import PlanshiftError
from detector.model import Plan, Severity, parse_plan
from detector.model.units import fmt_ms
from detector.reports import FORMATS, OutputSpec, format_for_path, gate_severity, resolve_outputs
from detector.reports.common import findings_by_query, fmt_number, slug
from detector.reports.comparison.github import escape_data, escape_property
from detector.reports.comparison.plan_diff import align, q_error

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "tests" / "fixtures" / "plans" / "pg15"
STORE = fixed_store()


def plan(name: str) -> Plan:
    document = json.loads((PLANS / f"{name}.json").read_text())
    return parse_plan(document["explain"])


def test_every_format_is_registered() -> None:
    assert list(FORMATS) == ["terminal", "json", "markdown", "junit", "github", "html"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [("r.json", "json"), ("pr.md", "markdown"), ("junit.xml", "junit"), ("a/r.HTML", "html"),
     ("r.htm", "html"), ("out.txt", "terminal"), ("r.bin", None), ("noext", None)],
)  # fmt: skip
def test_format_from_extension(name: str, expected: str | None) -> None:
    assert format_for_path(Path(name)) == expected


def test_resolve_outputs() -> None:
    assert resolve_outputs(None, []) == [OutputSpec("terminal", None)]
    assert resolve_outputs("json", []) == [OutputSpec("json", None)]
    assert resolve_outputs(None, ["report.html", "junit.xml", "-"]) == [
        OutputSpec("html", Path("report.html")),
        OutputSpec("junit", Path("junit.xml")),
        OutputSpec("terminal", None),
    ]
    # --format applies to every output without a FORMAT: prefix (`--format json -o r.out`)
    assert resolve_outputs("json", ["r.out"]) == [OutputSpec("json", Path("r.out"))]
    assert resolve_outputs("json", ["github:-", "markdown:c.txt"]) == [
        OutputSpec("github", None),
        OutputSpec("markdown", Path("c.txt")),
    ]
    # a prefix that is no format is part of the path
    assert resolve_outputs(None, ["C:report.json"]) == [OutputSpec("json", Path("C:report.json"))]


@pytest.mark.parametrize(
    ("fmt", "outputs", "message"),
    [(None, ["report.bin"], "cannot tell the format"), ("pdf", [], "unknown format"),
     (None, ["a.json", "json:a.json"], "named twice")],
)  # fmt: skip
def test_resolve_outputs_refuses(fmt: str | None, outputs: list[str], message: str) -> None:
    with pytest.raises(PlanshiftError, match=message):
        resolve_outputs(fmt, outputs)


def test_gate_severity() -> None:
    assert gate_severity("never") is None and gate_severity(None) is None
    assert gate_severity("WARNING") is Severity.WARNING


def test_number_formats() -> None:
    assert [fmt_ms(v) for v in (0.06213, 1.406, 18.06, 1234.5, None)] == [
        "0.0621", "1.41", "18.1", "1234", "-"]  # fmt: skip
    assert [fmt_number(v) for v in (681.4, 100000.0, 0.35)] == ["681", "100,000", "0.35"]
    assert slug("sweep_sum [n=100]") == "sweep_sum-n-100"


def test_plan_diff_pairs_a_scan_flip_by_relation() -> None:
    rows = align(plan("range_bitmap_scan"), plan("range_index_scan"))
    statuses = [(r.status, r.baseline and r.baseline.node.node_type,
                 r.candidate and r.candidate.node.node_type) for r in rows]  # fmt: skip
    assert statuses == [
        ("same", "Aggregate", "Aggregate"),
        ("changed", "Bitmap Heap Scan", "Index Scan"),
        ("removed", "Bitmap Index Scan", None),
    ]
    assert "node type: Bitmap Heap Scan -> Index Scan" in rows[1].changes


def test_plan_diff_matches_by_relation_not_position() -> None:
    rows = align(plan("join_hash"), plan("join_nested_loop"))
    by_relation = {
        r.baseline.node.relation: r for r in rows if r.baseline and r.baseline.node.relation
    }
    assert by_relation["sbtest2"].status == "same"  # second child of the hash join, first of NL
    assert by_relation["sbtest1"].status == "moved"
    assert any(r.status == "changed" and "Nested Loop" in " ".join(r.changes) for r in rows)


def test_plan_diff_of_identical_shapes_is_all_same() -> None:
    rows = align(plan("range_index_scan"), plan("range_index_scan_other_constants"))
    assert {r.status for r in rows} == {"same"}


def test_q_error() -> None:
    node = plan("estimate_error").root
    worst = max(q_error(n) or 1.0 for _, n in plan("estimate_error").nodes())
    assert worst >= 10 and q_error(node) is not None


def test_crossings_interpolate_on_log_axes() -> None:
    xs = [100.0, 1000.0, 10000.0]
    index = [1.0, 10.0, 100.0]  # grows with the parameter
    seq = [30.0, 30.0, 30.0]  # constant
    (x,) = crossings(xs, index, seq, log_x=True)
    assert x == pytest.approx(10 ** (2 + math.log10(30)), rel=1e-9)  # index = seq at 3000
    assert crossings(xs, seq, seq, log_x=True) == []  # equal everywhere: no crossing
    assert crossings(xs, [1.0, 30.0, 100.0], seq, log_x=False) == []  # touching is not crossing


def test_findings_of_sweep_points_go_to_their_point() -> None:
    from detector.engine.comparison.options import CompareOptions
    from detector.jobs.compare import compare_from_store

    result = compare_from_store(STORE, "current", "proposed", None, CompareOptions())
    owned, orphans = findings_by_query(result)
    assert not orphans
    assert sum(len(f) for f in owned.values()) == len(result.findings)
    for index, findings in owned.items():
        query = result.queries[index]
        for finding in findings:
            assert finding.query_key == query.query_key
            if "ratio" in finding.evidence:
                assert finding.evidence["ratio"] == query.timing.ratio


def planshift(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "detector", *map(str, args)],
        capture_output=True, text=True, cwd=cwd, timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "PYTHONSAFEPATH": "1"},
    )  # fmt: skip


def test_cli_writes_several_outputs_in_one_run(tmp_path: Path) -> None:
    result = planshift(
        "compare", "--store", STORE, "-b", "current", "-c", "proposed",
        "-o", "report.html", "-o", "junit.xml", "-o", "markdown:comment.txt", "-o", "github:-",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # the fixture has error findings
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert ET.parse(tmp_path / "junit.xml").getroot().tag == "testsuites"
    assert (tmp_path / "comment.txt").read_text().startswith("<!-- planshift-report -->")
    assert result.stdout.startswith("::error title=")


def test_cli_keeps_format_json_with_one_output(tmp_path: Path) -> None:
    result = planshift(
        "compare", "--store", STORE, "-b", "current", "-c", "proposed", "--format", "json",
        "-o", "out.data", "--fail-on", "never", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "out.data").read_text())["format_version"] == 1
    assert result.stdout == ""


def test_cli_unknown_extension_is_a_usage_error(tmp_path: Path) -> None:
    result = planshift(
        "compare", "--store", STORE, "-b", "current", "-c", "proposed", "-o", "r.pdf", cwd=tmp_path
    )
    assert result.returncode == 2
    assert "error: --output r.pdf" in result.stderr and "hint:" in result.stderr


def test_github_escaping() -> None:
    assert escape_data("50% slower\nnext") == "50%25 slower%0Anext"
    assert escape_property("PS200 a: b, c") == "PS200 a%3A b%2C c"


def test_census_heat_map_page_from_planshift_census() -> None:
    from detector.engine.census import build_census
    from detector.reports.census.html import grid_from_census, render_census_html
    from detector.store import Store

    with Store(STORE, read_only=True) as store:
        censuses = build_census(store, store.targets())
    sweep = next(c for c in censuses if c.query_name == "sweep_sum")
    grid = grid_from_census(sweep)
    assert grid.param == "n" and len(grid.columns) == 7
    assert {target for target, _ in grid.rows} == {"current", "proposed", "indexscan", "seqscan"}
    assert all(sum(row) > 0 for row in grid.counts)
    for col in range(len(grid.columns)):  # each target's shares at a point sum to 1
        for target in ("current", "seqscan"):
            total = sum(grid.shares[i][col] for i, (t, _) in enumerate(grid.rows) if t == target)
            assert total == pytest.approx(1.0)
    page = render_census_html(censuses)
    assert page.count('<svg class="chart"') == len(censuses)
    assert "current switches between n=300 and n=1000" in page


def test_html_renders_odd_results() -> None:
    """No timings on a side, a sweep with non-numeric points, no findings: still a full page."""
    from dataclasses import replace

    from detector.engine.comparison.options import CompareOptions
    from detector.jobs.compare import compare_from_store
    from detector.reports import render

    result = compare_from_store(STORE, "current", "proposed", None, CompareOptions())
    queries = list(result.queries)
    queries[0] = replace(
        queries[0], candidate=replace(queries[0].candidate, durations_ms=(), timing=None)
    )
    sweep = [i for i, q in enumerate(queries) if q.point]
    for n, i in enumerate(sweep):
        queries[i] = replace(queries[i], point=f"mode={'abcdefg'[n]}")
    odd = replace(result, queries=tuple(queries), findings=())
    page = render("html", odd, fail_on=None)
    assert whole_page(page).count('<table class="plandiff') == len(queries)
    assert "Gate off" in page and 'data-chart="sweep0"' in page
    assert render("html", odd, fail_on=None) == page
