"""The HTML reports as a person sees them: opened in headless Chromium (Debian's `chromium`).

Checks that the pages render without console errors (the Content-Security-Policy lets the
page's own script run and nothing else) and with their script run to the end, that nothing is
fetched from the network, and asserts on the rendered DOM: queries by importance, the plan diff
rows against the plans' nodes, each side's conditions, the per-node actuals summed over loops,
the JSON behind every copy button and download link, and the census's plan diagrams node by
node. Over the DevTools protocol it clicks every copy button and reads the clipboard, and
clicks download links and reads the files saved.
scripts/screenshots.py makes the committed screenshots with the same Chromium helper.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from chromium import (
    CHROMIUM,
    DevTools,
    Element,
    chromium,
    console_problems,
    needs_chromium,
    rendered,
)
from helpers import fixed_store, whole_page

from detector.model import ComparisonResult, QueryComparison, parse_plan
from detector.model.units import fmt_ms, fmt_version

ROOT = Path(__file__).resolve().parent.parent
STORE = fixed_store()


@pytest.fixture(scope="module")
def result() -> ComparisonResult:
    from detector.engine.comparison.options import CompareOptions
    from detector.jobs.compare import compare_from_store

    return compare_from_store(STORE, "current", "proposed", None, CompareOptions())


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, result: ComparisonResult) -> Path:
    from detector.model import Severity
    from detector.reports import render

    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(render("html", result, fail_on=Severity.ERROR))
    return path


def test_the_page_is_self_contained(report: Path) -> None:
    text = whole_page(report.read_text())
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:)?//""", text)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", text)
    assert "<script src" not in text and "<link " not in text
    assert text.count("<svg") >= 2 + 9  # sweep chart, census diagram, one CDF per query
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', text)
    assert policy and "default-src 'none'" in policy.group(1)
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/=]+'", policy.group(1))


@needs_chromium
def test_the_console_check_sees_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>"
    )
    assert console_problems(chromium(broken, "--dump-dom").stderr)
    refused = tmp_path / "refused.html"  # what a script whose hash the policy lacks gets
    refused.write_text(
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
        "content=\"script-src 'none'\"></head><body><script>1;</script></body></html>"
    )
    assert console_problems(chromium(refused, "--dump-dom").stderr)


@pytest.fixture(scope="module")
def dom(report: Path) -> Element:
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium missing: apt-get install chromium (scripts/bootstrap.sh)")
    return rendered(report)


def _blocks(dom: Element) -> list[Element]:
    return dom.find_all("details", "query")


def test_chromium_renders_the_report(dom: Element) -> None:
    (body,) = dom.find_all("body")
    assert body.attrs.get("data-ready") == "yes", "the page's script did not run to the end"
    charts = dom.find_all("svg", "chart")
    assert len(charts) >= 11
    assert {"sweep0", "census0"} <= {c.attrs.get("data-chart") for c in charts}
    assert len(dom.find_all("table", "plandiff")) == 9
    assert "Gate fails" in body.content() and "Findings by workload impact" in body.content()


def test_queries_are_in_order_of_importance(dom: Element, result: ComparisonResult) -> None:
    from detector.reports.common import by_importance, is_quiet
    from detector.reports.comparison.html_query import anchor

    shown = [block.attrs["id"] for block in _blocks(dom)]
    assert shown == [anchor(result.queries[i]) for i in by_importance(result)]
    # the summary leads with one row per query that is no sweep point, most important first
    (glance,) = dom.find_all("table", "at-a-glance")
    links = [a.attrs["href"] for a in glance.find_all("a")]
    notable = [q for q in _ordered(result) if not is_quiet(q) and not q.point]
    assert links == [f"#{anchor(q)}" for q in notable] and links
    # and every sweep point is a row of its sweep's table, in parameter order
    (points,) = dom.find_all("table", "points")
    swept = sorted((q for q in result.queries if q.point), key=lambda q: int(q.point.split("=")[1]))
    assert [a.attrs["href"] for a in points.find_all("a")] == [f"#{anchor(q)}" for q in swept]


def test_plan_diff_rows_conditions_and_actuals(dom: Element, result: ComparisonResult) -> None:
    from detector.model.units import fmt_count
    from detector.reports.common import condition_text
    from detector.reports.comparison.html_plan import side_conditions
    from detector.reports.comparison.plan_diff import align, node_totals

    blocks = _blocks(dom)
    for index, query in enumerate(result.queries):
        (table,) = next(b for b in blocks if b.find_all("h3", id=f"plan{index}-diff")).find_all(
            "table", "plandiff"
        )
        heads = {h.attrs["data-role"]: h.content() for h in table.find_all("th", "side-head")}
        for role, side in (("baseline", query.baseline), ("candidate", query.candidate)):
            assert f"PostgreSQL {fmt_version(side.server_version_num)}" in heads[role]
            for name, (base, cand) in result.settings_diff.items():
                value = base if role == "baseline" else cand
                assert f"{name}={value or 'default'}" in heads[role]
            measured = condition_text(result.conditions.get(role) or {})
            assert measured and measured in heads[role]
            assert " · ".join(side_conditions(result, role, side)) in heads[role]
        (body,) = table.find_all("tbody")
        rows = body.find_all("tr")
        expected = align(query.baseline.dominant.plan, query.candidate.dominant.plan)
        assert [r.attrs["class"] for r in rows] == [e.status for e in expected]
        for row, diff in zip(rows, expected, strict=True):
            cells = [c.content() for c in row.find_all("td")]
            assert len(cells) == 13  # node + 5 numbers, the gap, node + 5 numbers
            for flat, numbers in ((diff.baseline, cells[1:6]), (diff.candidate, cells[8:13])):
                if flat is None:
                    assert numbers == [""] * 5
                    continue
                totals = node_totals(flat.node)
                assert numbers == [
                    fmt_count(totals.estimated_rows),
                    fmt_count(totals.actual_rows),
                    fmt_count(totals.loops),
                    fmt_ms(totals.time_ms),
                    f"{flat.node.buffers.shared_total:,}",
                ]
        assert "total over the node's loops" in table.content()


def test_copy_and_download_carry_each_plan_once(dom: Element, result: ComparisonResult) -> None:
    for index, (block, query) in enumerate(zip(_blocks(dom), _ordered(result), strict=True)):
        links = {a.attrs["id"]: a for a in block.find_all("a", "download-json")}
        buttons = block.find_all("button", "copy-json")
        variants = [*query.baseline.plans, *query.candidate.plans]
        assert len(links) == len(buttons) == len(variants)
        shown = []
        for button in buttons:
            link = links[button.attrs["data-plan"]]
            href = link.attrs["href"]
            assert href.startswith("data:application/json;charset=utf-8,")
            text = unquote(href.partition(",")[2])
            assert button.attrs["data-length"] == str(len(text)), "the script read the link's JSON"
            assert link.attrs["download"].endswith(".json")
            shown.append(parse_plan(json.loads(text)).root)
        assert sorted(map(repr, shown)) == sorted(repr(v.plan.root) for v in variants), index


@needs_chromium
def test_copy_buttons_put_the_plan_json_on_the_clipboard(report: Path) -> None:
    with DevTools(report) as page:
        assert page.evaluate("document.body.getAttribute('data-ready')") == "yes"
        assert page.requested() == [report.as_uri()], "the page loads nothing else"
        buttons = page.evaluate(
            "Array.from(document.querySelectorAll('button.copy-json'), b => b.dataset.plan)"
        )
        assert len(buttons) >= 18
        for plan in buttons:
            link = page.evaluate(f"document.getElementById('{plan}').getAttribute('href')")
            expected = unquote(link.partition(",")[2])
            page.evaluate("navigator.clipboard.writeText('-')")
            page.evaluate(f"document.querySelector('button[data-plan=\"{plan}\"]').click()")
            # the copy is asynchronous: wait for the clipboard to change, in the page
            copied = page.evaluate(CLIPBOARD_CHANGED)
            assert copied == expected, plan
            assert parse_plan(copied).root.node_type


@needs_chromium
def test_download_links_save_the_plan_json(report: Path, tmp_path: Path) -> None:
    with DevTools(report) as page:
        page.call(
            "Browser.setDownloadBehavior",
            {"behavior": "allow", "downloadPath": str(tmp_path), "eventsEnabled": True},
        )
        links = page.evaluate(
            "Array.from(document.querySelectorAll('a.download-json'), a => [a.id, a.download])"
        )
        for element, name in links[:4]:
            href = page.evaluate(f"document.getElementById('{element}').getAttribute('href')")
            page.evaluate(f"document.getElementById('{element}').click()")
            page.event("Browser.downloadProgress", state="completed")
            assert (tmp_path / name).read_text() == unquote(href.partition(",")[2])


CLIPBOARD_CHANGED = """new Promise(function (resolve) {
  (function poll() {
    navigator.clipboard.readText().then(function (text) {
      if (text !== '-') { resolve(text); } else { setTimeout(poll, 10); }
    });
  })();
})"""


def _ordered(result: ComparisonResult) -> list[QueryComparison]:
    from detector.reports.common import by_importance

    return [result.queries[i] for i in by_importance(result)]


def _node_counts(*results: ComparisonResult) -> dict[str, int]:
    """Plan signature -> nodes of its plan, from the comparisons' parsed plans."""
    return {
        variant.signature: sum(1 for _ in variant.plan.nodes())
        for result in results
        for query in result.queries
        for side in (query.baseline, query.candidate)
        for variant in side.plans
    }


def _check_diagram(svg: Element, nodes: dict[str, int], rows: int, columns: int) -> None:
    shapes = svg.find_all("g", "shape")
    assert shapes, "a legend entry per plan shape"
    for shape in shapes:
        signature = shape.find_all("title")[0].content()
        drawn = shape.find_all("g", "pnode")
        assert len(drawn) == int(shape.attrs["data-nodes"]) == nodes[signature], signature
        assert {d.attrs["data-shape"] for d in drawn} == {shape.attrs["data-shape"]}
    cells = svg.find_all("g", "cell")
    empty = [r for r in svg.find_all("rect") if "no execution" in r.content()]
    assert len(cells) + len(empty) == rows * columns
    assert {c.attrs["data-shape"] for c in cells} <= {s.attrs["data-shape"] for s in shapes}


def test_the_reports_census_is_a_plan_diagram(dom: Element, result: ComparisonResult) -> None:
    (svg,) = [s for s in dom.find_all("svg", "chart") if s.attrs.get("data-chart") == "census0"]
    assert svg.attrs.get("data-kind") == "plan-diagram"
    _check_diagram(svg, _node_counts(result), rows=2, columns=7)


@needs_chromium
def test_chromium_renders_the_census_page(tmp_path: Path) -> None:
    from detector.engine.comparison.options import CompareOptions
    from detector.jobs.census import census_from_store
    from detector.jobs.compare import compare_from_store
    from detector.reports.census.html import render_census_html

    censuses = census_from_store(STORE, None, None, [])
    page = tmp_path / "census.html"
    page.write_text(render_census_html(censuses))
    dom = rendered(page)
    diagrams = dom.find_all("svg", "chart", data_kind="plan-diagram")
    assert len(diagrams) == len(censuses) == 3
    forced = compare_from_store(STORE, "indexscan", "seqscan", None, CompareOptions())
    gate = compare_from_store(STORE, "current", "proposed", None, CompareOptions())
    nodes = _node_counts(forced, gate)
    for svg, census in zip(diagrams, censuses, strict=True):
        _check_diagram(svg, nodes, len(census.targets), len(census.points))
        letters = [s.attrs["data-shape"] for s in svg.find_all("g", "shape")]
        assert letters == [census.letter(s) for s in census.signatures]


@needs_chromium
def test_the_screenshot_script_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "screenshots.py"), "--out", str(tmp_path),
         "--sample", str(tmp_path / "report.html")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    names = ("report-demo", "report-plan-diff", "report-sweep", "report-census")
    for name in names:
        png = tmp_path / f"{name}.png"
        assert png.read_bytes().startswith(b"\x89PNG"), name
    assert "Plan diff" in (tmp_path / "report.html").read_text()


@needs_chromium
def test_the_demo_plan_diff_shows_the_conditions_and_counters(tmp_path: Path) -> None:
    """Issue 28's check: in the demo's report (examples/demo/demo.duckdb, a real run of the
    demo workload on PostgreSQL 15) each flipped query's plan diff shows, as text a reader sees,
    the Recheck Cond and the heap-block counters on the bitmap side and the Index Cond on the
    index side, under a line saying what changed."""
    import shutil

    from detector.engine.comparison.options import CompareOptions
    from detector.jobs.compare import compare_from_store
    from detector.model import Severity
    from detector.reports import render

    store = tmp_path / "demo.duckdb"
    shutil.copyfile(ROOT / "examples" / "demo" / "demo.duckdb", store)
    demo = compare_from_store(store, "current", "proposed", None, CompareOptions())
    page = tmp_path / "demo.html"
    page.write_text(render("html", demo, fail_on=Severity.ERROR))
    flipped = [i for i, q in enumerate(demo.queries) if q.plan_changed]
    assert {demo.queries[i].query_name for i in flipped} == {"simple_range", "sum_range"}
    with DevTools(page) as browser:
        for index in flipped:
            # innerText: what is rendered, so nothing hidden or clipped away counts
            cells = browser.evaluate(
                f"Array.from(document.getElementById('plan{index}-diff').parentElement"
                ".querySelectorAll('table.plandiff td.node'), td => td.innerText)"
            )
            bitmap = next(c for c in cells if c.startswith("BitmapHeapScan(sbtest1)"))
            index_scan = next(c for c in cells if c.startswith("IndexScan(sbtest1 sbtest1_pkey)"))
            assert re.search(r"Recheck Cond: \(\(id >= \d+\) AND \(id <= \d+\)\)", bitmap)
            assert re.search(r"Heap Blocks: exact=[\d,]+ lossy=[\d,]+", bitmap)
            assert re.search(r"Index Cond: \(\(id >= \d+\) AND \(id <= \d+\)\)", index_scan)
            changed = browser.evaluate(
                f"document.getElementById('plan{index}-diff').nextElementSibling.innerText"
            )
            assert changed.startswith("What changed: BitmapHeapScan(sbtest1) → IndexScan(")
