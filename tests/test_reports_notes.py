"""What the terminal report says, the HTML and Markdown reports say too: the data each side ran
on (the committed store, a real PostgreSQL 15 run), and a plan mix that moved under the same
dominant plan (tests/fixtures/logs/prepared/reload.log: 70 of 180 executions of a prepared
statement were Bitmap Heap Scans before `random_page_cost` was reloaded, none after)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from chromium import CHROMIUM, rendered
from helpers import fixed_store, ingest, whole_page
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from detector.cli.app import app
from detector.store import Store

RELOAD = Path(__file__).resolve().parent / "fixtures" / "logs" / "prepared" / "reload.log"
BITMAP = "Aggregate > BitmapHeapScan(orders) > BitmapIndexScan(orders_customer)"
MIX = f"plan mix changed: {BITMAP} 70/180 -> 0/180"
SETTING = 'parameter "random_page_cost" changed to "1.1"'


def _compare(store: Path, base: str, cand: str, fmt: str, path: Path) -> str:
    args = ["compare", "--store", str(store), "-b", base, "-c", cand, "-o", f"{fmt}:{path}"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code in (0, 1), done.output
    return path.read_text()


def test_the_data_lines_are_in_every_report(tmp_path: Path) -> None:
    store = fixed_store()
    terminal = CliRunner().invoke(app, ["compare", "--store", str(store), "-b", "current",
                                        "-c", "proposed"])  # fmt: skip
    assert terminal.exit_code in (0, 1), terminal.output
    (line,) = [x for x in terminal.output.splitlines() if x.startswith("data: ")]
    assert re.fullmatch(r"data: t 100000 rows on both, correlation a [\d.]+ / [\d.]+", line)
    markdown = _compare(store, "current", "proposed", "markdown", tmp_path / "r.md")
    assert f"_{line}._" in markdown
    page = _compare(store, "current", "proposed", "html", tmp_path / "r.html")
    assert f"<p>{line}</p>" in page


@pytest.fixture(scope="module")
def windows(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The reload log ingested; the window up to the reload, and the one from the setting
    change it logged on (the change stands between them)."""
    store = tmp_path_factory.mktemp("reload") / "s.duckdb"
    ingest(store, RELOAD, source="shop")
    with Store(store, read_only=True) as db:
        (reload,) = [e for e in db.log_events() if e.kind == "reload"]
        (change,) = [e for e in db.log_events() if e.kind == "setting"]
    assert isinstance(reload.logged_at, datetime) and isinstance(change.logged_at, datetime)
    after = change.logged_at + timedelta(milliseconds=1)
    return store, f"..{reload.logged_at.isoformat()}", f"{after.isoformat()}.."


def test_markdown_says_the_plan_mix_changed(windows: tuple[Path, str, str], tmp_path: Path) -> None:
    text = _compare(*windows, "markdown", tmp_path / "r.md")
    html = MarkdownIt("commonmark").enable("table").render(text)
    # the summary table's plan cell, the query's details, the timeline of events
    assert f"<br>{MIX}" in html.replace("&gt;", ">")
    assert "plan mix changed</summary>" in text
    assert f"**{MIX}" in text.replace("\\>", ">")
    assert "| candidate window | candidate | plan mix | 1 plan mix change: " in text
    assert "before this plan mix change:\n\n- received SIGHUP" in text
    assert f"\n- {SETTING} (reload.log:9203)\n" in text


def test_html_says_the_plan_mix_changed(windows: tuple[Path, str, str], tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    text = whole_page(_compare(*windows, "html", page)).replace("&gt;", ">")
    assert f'<span class="mix">{MIX}' in text  # the summary table
    assert "plan mix changed</span>" in text  # the query's badge
    assert f"<b>What changed:</b> {MIX}" in text
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium missing: apt-get install chromium (scripts/bootstrap.sh)")
    dom = rendered(page)
    (section,) = dom.find_all("section", id="events")
    rows = [[c.content() for c in r.find_all("td")] for r in section.find_all("tr")]
    kinds = [r[2] for r in rows if r]
    assert kinds.index("setting") < kinds.index("plan mix")  # the change came after the reload
    (flips,) = section.find_all("ul", "flips")
    assert MIX in flips.content().replace("&gt;", ">")
    changed = [p.content().replace("&gt;", ">") for p in dom.find_all("p", "what-changed")]
    assert any(MIX in c and f"after: {SETTING}" in c for c in changed)
