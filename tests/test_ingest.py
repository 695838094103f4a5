"""auto_explain log ingest on logs a real cluster just wrote: stderr, csvlog, jsonlog; JSON and
text plans; log_analyze on and off; gzip; resuming and idempotent re-ingest."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collectors.logs import batches as log_batches
from collectors.logs.plans import duration_of
from collectors.logs.prefix import TimeParser
from detector.cli.app import app
from detector.store import OBSERVATION_COLUMNS, Store

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "logs"))
from capture_logs import MODES, PREFIX, expected_plans
from helpers import Rows, ingest, stored

pytestmark = pytest.mark.pg


@pytest.mark.parametrize("major", [14, 15, 16, 17, 18])
def test_stderr_csvlog_and_jsonlog_give_the_same_observations(
    live_logs: Callable[[int], Path], tmp_path: Path, major: int
) -> None:
    logs = live_logs(major)
    results = {}
    for name in ("pg.log", "pg.csv", "pg.json")[: 2 if major < 15 else 3]:  # jsonlog: 15+
        (report,) = ingest(tmp_path / f"{name}.duckdb", logs / name)
        assert report.problem_count == 0 and report.plans == expected_plans() * len(MODES)
        results[name] = stored(tmp_path / f"{name}.duckdb")
    assert results["pg.log"] == results["pg.csv"] == results.get("pg.json", results["pg.log"])
    assert len(results["pg.log"]) == expected_plans() * len(MODES)


@pytest.mark.parametrize("major", [14, 15, 16, 17, 18])
def test_fast_general_and_model_paths_store_the_same_rows(
    live_logs: Callable[[int], Path],
    tmp_path: Path,
    major: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """JSON entries take log_fast's typed decode; without it, the dict path of log_rows; with
    other store columns, the model. All three must store the same observations."""
    log = live_logs(major) / "pg.log"
    ingest(tmp_path / "fast.duckdb", log)
    monkeypatch.setattr(log_batches, "decode", lambda body: None)
    ingest(tmp_path / "general.duckdb", log)
    monkeypatch.setattr(log_batches, "FAST_PATH", False)
    ingest(tmp_path / "model.duckdb", log)
    columns = ", ".join(OBSERVATION_COLUMNS)
    found = {}
    for name in ("fast", "general", "model"):
        with Store(tmp_path / f"{name}.duckdb", read_only=True) as store:
            found[name] = store._con.execute(
                f"SELECT {columns} FROM observations ORDER BY observation_id"
            ).fetchall()
    assert len(found["fast"]) == expected_plans() * len(MODES)
    assert found["fast"] == found["general"] == found["model"]
    heap = OBSERVATION_COLUMNS.index("exact_heap_blocks")
    assert any(row[heap] for row in found["fast"])  # the bitmap query's Exact Heap Blocks


@pytest.mark.parametrize("major", [14, 15, 16, 17, 18])
def test_json_and_text_plans_analyze_on_and_off(
    live_logs: Callable[[int], Path], tmp_path: Path, major: int
) -> None:
    ingest(tmp_path / "s.duckdb", live_logs(major) / "pg.log")
    rows = stored(tmp_path / "s.duckdb")
    by_mode: dict[str, Rows] = {database: [] for database in MODES}
    for row in rows:
        by_mode[row[0]].append(row)
    for database, (log_format, analyze) in MODES.items():
        mode_rows = by_mode[database]
        assert len(mode_rows) == expected_plans()
        assert {row[7] for row in mode_rows} == {log_format}
        assert {row[8] for row in mode_rows} == {analyze == "on"}
        # the duration comes from the log line when the plan has no times
        assert all(row[4] is not None and row[4] >= 0 for row in mode_rows)
        assert all(row[6] is not None for row in mode_rows)  # %Q and Query Identifier
        if analyze == "off":
            assert all(row[9] is None for row in mode_rows)
    # same query and parameters -> same plan shape, whatever the format and analyze setting
    # (PostgreSQL 15 logs no parameters: the n-th execution of a query in each database)
    shapes: dict[tuple[str, str, int], set[str]] = {}
    seen: dict[tuple[str, str, str], int] = {}
    for row in sorted(rows, key=lambda r: (r[0], r[5])):
        nth = seen[row[:3]] = seen.get(row[:3], -1) + 1
        shapes.setdefault((row[1], row[2], nth), set()).add(row[3])
    assert all(len(fps) == 1 for fps in shapes.values()), shapes
    assert len({fp for fps in shapes.values() for fp in fps}) >= 7


def test_parameters_and_literals_are_kept_per_observation(
    live_logs: Callable[[int], Path], tmp_path: Path
) -> None:
    ingest(tmp_path / "s.duckdb", live_logs(17) / "pg.json")
    rows = stored(tmp_path / "s.duckdb")
    ranges = {row[2] for row in rows if row[1] == "SELECT sum(v) FROM t WHERE id < $1"}
    assert ranges == {'{"$1": "10"}', '{"$1": "50"}', '{"$1": "15000"}'}
    literal = {(row[1], row[2]) for row in rows if "v = $1" in row[1] and "count" in row[1]}
    assert literal == {("SELECT count(*)\n  FROM t\n WHERE v = $1", '["7"]')}
    fingerprints = {row[3] for row in rows if row[1] == "SELECT sum(v) FROM t WHERE id < $1"}
    assert len(fingerprints) == 2  # index scan for 10 and 50, seq scan for 15000


def test_reingest_adds_nothing_and_a_growing_file_resumes(
    live_logs: Callable[[int], Path], tmp_path: Path
) -> None:
    full = (live_logs(17) / "pg.log").read_bytes()
    growing = tmp_path / "postgresql.log"
    cut = full.index(b"plan:", len(full) // 2) + 200  # in the middle of a JSON plan
    growing.write_bytes(full[:cut])
    (first,) = ingest(tmp_path / "s.duckdb", growing)
    assert 0 < first.plans < expected_plans() * len(MODES)
    assert first.incomplete and first.problem_count == 0
    growing.write_bytes(full)
    (second,) = ingest(tmp_path / "s.duckdb", growing)
    assert second.resumed_at_line is not None
    assert first.plans + second.plans == expected_plans() * len(MODES)
    (third,) = ingest(tmp_path / "s.duckdb", growing)
    assert third.plans == 0 and third.messages == 0
    whole = tmp_path / "whole.duckdb"
    ingest(whole, live_logs(17) / "pg.log")
    assert stored(tmp_path / "s.duckdb") == stored(whole)


def test_gzip_and_a_renamed_file_are_recognized(
    live_logs: Callable[[int], Path], tmp_path: Path
) -> None:
    plain = live_logs(18) / "pg.csv"
    packed = tmp_path / "postgresql-2026-11-22.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    (report,) = ingest(tmp_path / "gz.duckdb", packed)
    assert report.compressed and report.log_format == "csvlog"
    ingest(tmp_path / "plain.duckdb", plain)
    assert stored(tmp_path / "gz.duckdb") == stored(tmp_path / "plain.duckdb")
    renamed = tmp_path / "renamed.csv"
    shutil.copyfile(plain, renamed)
    (again,) = ingest(tmp_path / "plain.duckdb", renamed)
    assert again.plans == 0


def test_without_the_prefix_setting_common_prefixes_are_guessed(
    live_logs: Callable[[int], Path], tmp_path: Path
) -> None:
    ingest(tmp_path / "known.duckdb", live_logs(17) / "pg.log")
    ingest(tmp_path / "guessed.duckdb", live_logs(17) / "pg.log", prefix=None)
    known, guessed = stored(tmp_path / "known.duckdb"), stored(tmp_path / "guessed.duckdb")
    assert len(known) == len(guessed)
    # without %Q the query id still comes from verbose plans ("Query Identifier")
    assert [r[:6] for r in known] == [r[:6] for r in guessed]
    assert all(r[6] is not None for r in guessed)


def test_cli_ingest_and_its_report(live_logs: Callable[[int], Path], tmp_path: Path) -> None:
    store = tmp_path / "cli.duckdb"
    log = live_logs(17) / "pg.log"
    runner = CliRunner()
    result = runner.invoke(
        app, ["ingest", str(log), "--store", str(store), "--log-line-prefix", PREFIX]
    )
    assert result.exit_code == 0, result.output
    assert f"{expected_plans() * len(MODES)} plans from 1 files" in result.output
    again = runner.invoke(app, ["ingest", str(log), "--store", str(store)])
    assert again.exit_code == 0 and "0 plans from 1 files" in again.output
    missing = runner.invoke(app, ["ingest", str(tmp_path / "nope.log"), "--store", str(store)])
    assert missing.exit_code == 2
    no_jobs = runner.invoke(app, ["ingest", str(log), "--store", str(store), "--jobs", "0"])
    assert no_jobs.exit_code == 2 and "--jobs" in no_jobs.output
    with Store(store, read_only=True) as db:
        (files,) = db.log_files()
        assert files.plans == expected_plans() * len(MODES) and files.problems == 0
        assert json.loads(json.dumps(list(files.pending_starts))) == []


def test_damaged_durations_and_times_read_as_missing() -> None:
    assert duration_of("duration: 0.013 ms  plan:") == 0.013
    assert duration_of("duration: 12 ms  plan:") == 12.0
    assert duration_of("duration: .5 ms  plan:") == 0.5
    for damaged in ("duration: 1.2.3 ms  plan:", "duration: ms  plan:", "statement: SELECT 1"):
        assert duration_of(damaged) is None
    times = TimeParser()
    assert times.epoch("1700000000.5") == datetime(2023, 11, 14, 22, 13, 20, 500000)
    assert times.epoch("9" * 20) is None  # %n digits damaged past year 9999
    assert times.parse("2026-13-45 25:61:00.000 UTC") is None
