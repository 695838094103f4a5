"""A postmortem's reports: two time windows of a real PostgreSQL 17 log
(tests/fixtures/logs/events: `ALTER SYSTEM SET random_page_cost` and a reload flip a query)
compared in HTML and Markdown, the formats that get attached to the incident ticket, list the
server events the terminal and JSON list (`parameter "random_page_cost" changed to "60"` with
its file:line), on one timeline with the flip, and beside the flip in the query's details."""

from __future__ import annotations

from pathlib import Path

import pytest
from chromium import CHROMIUM, rendered
from helpers import whole_page
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from detector.cli.app import app
from detector.store import Store

EVENTS = Path(__file__).resolve().parent / "fixtures" / "logs" / "events"
SETTING = 'parameter "random_page_cost" changed to "60"'


@pytest.fixture(scope="module")
def windows(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, int]:
    """The store, the window before the reload and the one from the flip on, and the log line
    of the setting change."""
    store = tmp_path_factory.mktemp("events") / "s.duckdb"
    done = CliRunner().invoke(app, ["ingest", str(EVENTS / "pg.log"), "--store", str(store)])
    assert done.exit_code == 0, done.output
    with Store(store, read_only=True) as db:
        (change,) = [e for e in db.log_events() if e.kind == "setting"]
        (reload,) = [e for e in db.log_events() if e.kind == "reload"]
        rows = [r.row for r in db.log_observations() if "random_page_cost" in (r.settings or "")]
        flip_at = min(row.collected_at for row in rows)
        before = max(
            r.row.collected_at
            for r in db.log_observations()
            if r.row.query_key == rows[0].query_key and r.row.collected_at < flip_at
        )
    assert reload.logged_at is not None and change.logged_at is not None
    middle = before + (reload.logged_at - before) / 2
    return store, f"..{middle.isoformat()}", f"{flip_at.isoformat()}..", change.line


def _report(windows: tuple[Path, str, str, int], fmt: str, path: Path) -> str:
    store, base, cand, _ = windows
    args = ["compare", "--store", str(store), "-b", base, "-c", cand, "-o", f"{fmt}:{path}"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code in (0, 1), done.output
    assert f"wrote {fmt} {path}" in done.output  # every report went to a file: one line says so
    return path.read_text()


def test_markdown_lists_the_events_beside_the_flip(
    windows: tuple[Path, str, str, int], tmp_path: Path
) -> None:
    text = _report(windows, "markdown", tmp_path / "r.md")
    line = windows[3]
    rendered_html = MarkdownIt("commonmark").enable("table").render(text)
    assert "Server events and plan flips" in rendered_html
    assert (
        f"<td>between</td>\n<td>setting</td>\n<td>{SETTING.replace(chr(34), '&quot;')}</td>\n<td>pg.log:{line}</td>"
        in rendered_html
    )
    assert "<td>plan flip</td>" in rendered_html and "items:" in rendered_html
    # in the flipped query's details too
    assert f"- {SETTING} (pg.log:{line})" in text


def test_html_shows_the_events_timeline_beside_the_flip(
    windows: tuple[Path, str, str, int], tmp_path: Path
) -> None:
    page = tmp_path / "r.html"
    text = whole_page(_report(windows, "html", page))
    line = windows[3]
    assert (
        f"pg.log:{line}" in text
        and "parameter &#34;random_page_cost&#34; changed to &#34;60&#34;" in text
    )
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium missing: apt-get install chromium (scripts/bootstrap.sh)")
    dom = rendered(page)
    (section,) = dom.find_all("section", id="events")
    (table,) = section.find_all("table", "events")
    rows = [
        [c.content() for c in r.find_all("td")] for r in table.find_all("tbody")[0].find_all("tr")
    ]
    assert ["between", "setting", SETTING, f"pg.log:{line}"] in [r[1:] for r in rows]
    (flip,) = [r for r in rows if r[2] == "plan flip"]
    kinds = [r[2] for r in rows]
    assert kinds.index("setting") < kinds.index("plan flip")  # the flip follows the change
    assert "items" in flip[3]
    (flips,) = section.find_all("ul", "flips")
    assert "items" in flips.content()
    # and the flipped query's plan diff says what it followed
    changed = [p.content() for p in dom.find_all("p", "what-changed")]
    assert any(f"after: {SETTING} (pg.log:{line})" in c for c in changed)
