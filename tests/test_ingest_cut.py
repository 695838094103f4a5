"""Logs that start inside an entry, and logs that yield nothing: real csvlog and jsonlog cut with
`tail -c` inside a plan are detected and read from their next record; a real log whose plans
planshift cannot read (auto_explain.log_format = yaml and xml, tests/fixtures/logs/unreadable)
exits 2 naming the file and what was seen."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_log_managed import ingest, stored
from typer.testing import CliRunner

from collectors.logs.autoexplain import FileReport
from collectors.logs.formats import Problem
from collectors.logs.registry import detect_format
from detector.cli.app import app
from detector.store import Store

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
UNREADABLE = LOGS / "unreadable" / "pg.log"


@pytest.mark.parametrize(
    ("name", "log_format", "inside"),
    [
        ("pg.csv", "csvlog", b'""Node Type"": ""Append""'),  # a quoted plan line
        ("pg.csv", "csvlog", b'Node Type"": ""Append""'),  # odd quotes: inside a ""pair""
        ("pg.json", "jsonlog", b'Node Type\\": \\"Append'),  # the middle of a JSON line
    ],
)
def test_a_log_cut_inside_a_record_is_read_from_the_next(
    name: str, log_format: str, inside: bytes, tmp_path: Path
) -> None:
    full = (LOGS / "pg17" / name).read_bytes()
    cut = tmp_path / f"tail-c.{log_format}"
    cut.write_bytes(full[full.index(inside) :])  # as `tail -c` leaves it
    assert detect_format(cut.read_bytes()[:65536]) == log_format
    report = ingest(tmp_path / "cut.duckdb", cut)
    ingest(tmp_path / "full.duckdb", LOGS / "pg17" / name)
    whole, _ = stored(tmp_path / "full.duckdb")
    rest, _ = stored(tmp_path / "cut.duckdb")
    assert 0 < len(rest) < len(whole) and rest == whole[len(whole) - len(rest) :]
    ((problem),) = report.problems
    assert (problem.line, problem.kind) == (1, "truncated")
    assert problem.message.startswith("the file starts inside an entry")


def test_a_log_whose_plans_cannot_be_read_exits_2(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    runner = CliRunner()
    result = runner.invoke(
        app, ["ingest", str(UNREADABLE), str(LOGS / "pg17" / "pg.log"), "--store", str(store)]
    )
    assert result.exit_code == 2, result.output
    assert (
        f"error: nothing readable in {UNREADABLE} (stderr): none of its 20 auto_explain plans"
        in result.output
    )
    assert "auto_explain.log_format = yaml: planshift reads json and text" in result.output
    assert "hint: planshift reads plans of auto_explain.log_format json or text" in result.output
    assert "1 other file stored" in result.output
    with Store(store, read_only=True) as db:
        assert len(db.log_observations()) == 44  # the readable file was stored


def test_a_piece_with_no_entry_exits_2_and_is_not_kept(tmp_path: Path) -> None:
    """A piece of a real log from inside one plan (`head -c | tail -c`): every line is a
    tab-indented plan line, which the check of a file's head cannot judge; the reading finds no
    entry: exit 2, and no ledger row is kept for it (a later, whole copy is read afresh)."""
    full = (LOGS / "pg17" / "pg.log").read_bytes()
    start = full.index(b'\t  "Plan": {')
    piece = tmp_path / "piece.log"
    piece.write_bytes(full[start : full.index(b"\n2026-", start) + 1])
    store = tmp_path / "s.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(piece), "--store", str(store)])
    assert result.exit_code == 2, result.output
    assert (
        f"error: nothing readable in {piece} (stderr): no entry reads as stderr (" in result.output
    )
    assert "line 1: truncated: the file starts inside an entry" in result.output
    with Store(store, read_only=True) as db:
        assert db.log_files() == []
        assert db._con.execute("SELECT count(*) FROM log_problems").fetchone() == (0,)


def test_nothing_read_needs_problems_and_nothing_stored() -> None:
    report = FileReport("x.log", "stderr", False, None, messages=0)
    assert report.nothing_read() is None  # nothing to read is not nothing readable
    report.add_problems([Problem(1, "garbage", "not a log line: 'x'")] * 3)
    assert report.nothing_read() == (
        "no entry reads as stderr (3 problems; line 1: garbage: not a log line: 'x')"
    )
    report.events = 1
    assert report.nothing_read() is None  # something was read
