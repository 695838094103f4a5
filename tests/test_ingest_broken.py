"""Broken and foreign files given to `planshift ingest`, made from logs real servers wrote
(tests/fixtures/logs): damaged gzip, a byte-order mark, an impossible timestamp, another
compression, a file that is no log, a --log-line-prefix that reads nothing."""

from __future__ import annotations

import bz2
import gzip
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collectors.logs import autoexplain as autoexplain_log
from collectors.logs import parallel as log_parallel
from detector.cli.app import app
from detector.store import Store

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
PG17 = LOGS / "pg17" / "pg.log"
QUIRKS = LOGS / "quirks"  # 7 plans, 1 entry without query text


def run(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["ingest", *map(str, args)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def store_state(store_path: Path) -> tuple[int, list[str], list[tuple[str, str]]]:
    """(observations, run statuses, (kind, message) of the problems)."""
    with Store(store_path, read_only=True) as store:
        (count,) = store._con.execute("SELECT count(*) FROM observations").fetchone()
        statuses = [run.status for run in store.runs()]
        found = [(kind, message) for _, _, kind, message in store.log_problems()]
    return int(count), statuses, found


def test_a_gzip_cut_short_keeps_what_it_holds_and_says_so(tmp_path: Path) -> None:
    whole = gzip.compress(PG17.read_bytes())
    code, _ = run(PG17, "--store", tmp_path / "whole.duckdb")
    full, _, _ = store_state(tmp_path / "whole.duckdb")
    log = tmp_path / "cut.log.gz"
    log.write_bytes(whole[: len(whole) // 2])
    code, output = run(log, "--store", tmp_path / "s.duckdb")
    assert code == 0, output
    plans, statuses, found = store_state(tmp_path / "s.duckdb")
    assert 0 < plans < full and statuses == ["complete"]
    assert ("bad-gzip", "gzip data ends early (file cut short?); reading stopped there") in found
    assert "bad-gzip" in output and "Aborted" not in output


def test_trailing_garbage_and_a_damaged_gzip(tmp_path: Path) -> None:
    whole = gzip.compress((QUIRKS / "pg.log").read_bytes())
    trailing = tmp_path / "trailing.log.gz"
    trailing.write_bytes(whole + b"garbage after the gzip member\n")
    code, output = run(trailing, "--store", tmp_path / "t.duckdb")
    plans, statuses, found = store_state(tmp_path / "t.duckdb")
    assert code == 0 and plans == 7 and statuses == ["complete"], output
    assert [kind for kind, _ in found] == ["no-query", "bad-gzip"]
    header = tmp_path / "header.log.gz"
    header.write_bytes(whole[:3] + b"\xff" + whole[4:])  # flags that no gzip has
    code, output = run(header, "--store", tmp_path / "h.duckdb")
    assert code == 2 and "error: cannot decompress" in output and "Traceback" not in output
    assert not (tmp_path / "h.duckdb").exists()  # refused before a run began


def test_a_byte_order_mark_is_skipped(tmp_path: Path) -> None:
    for name in ("pg.csv", "pg.json", "pg.log"):
        log = tmp_path / name
        log.write_bytes(b"\xef\xbb\xbf" + (QUIRKS / name).read_bytes())
        code, output = run(log, "--store", tmp_path / f"{name}.duckdb")
        assert code == 0 and "7 plans from 1 files" in output, output
        assert store_state(tmp_path / f"{name}.duckdb")[2] == [
            ("no-query", "plan without a query text: not keyed to any query")
        ]


def test_a_timestamp_that_is_no_time_is_a_problem(tmp_path: Path) -> None:
    data = (QUIRKS / "pg.log").read_bytes()
    stamp = b"2026-11-24 13:36:55.264 UTC [6392]"  # the EXPLAIN entry's header
    assert data.count(stamp) == 1
    log = tmp_path / "month13.log"
    log.write_bytes(data.replace(stamp, stamp.replace(b"-11-", b"-13-")))
    code, output = run(log, "--store", tmp_path / "m.duckdb")
    plans, _, found = store_state(tmp_path / "m.duckdb")
    assert code == 0 and plans == 6, output
    assert ("bad-time", "no time: '2026-13-24 13:36:55.264 UTC'; skipped") in found
    with Store(tmp_path / "m.duckdb", read_only=True) as store:
        (latest,) = store._con.execute("SELECT max(collected_at) FROM observations").fetchone()
    assert latest.year == 2026 and latest.month == 11  # nothing stored at the ingest time


def test_other_compressions_and_files_that_are_no_log_are_refused(tmp_path: Path) -> None:
    compressed = tmp_path / "pg.log.bz2"
    compressed.write_bytes(bz2.compress(PG17.read_bytes()))
    code, output = run(compressed, "--store", tmp_path / "b.duckdb")
    assert code == 2 and "bzip2-compressed" in output and "bzip2 -dc" in output
    script = LOGS / "capture_logs.py"  # a real file, but no server log
    code, output = run(PG17, script, "--store", tmp_path / "n.duckdb")
    assert code == 2 and "is not a PostgreSQL server log" in output
    assert "stderr or csvlog or jsonlog" in output
    assert not (tmp_path / "n.duckdb").exists()  # PG17 was not ingested either
    code, output = run(script, "--format", "csvlog", "--store", tmp_path / "n.duckdb")
    assert code == 2 and "reads as csvlog" in output
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    assert run(empty, "--store", tmp_path / "e.duckdb")[0] == 0


def test_a_log_line_prefix_that_reads_nothing_is_an_error(tmp_path: Path) -> None:
    log, store = QUIRKS / "pg.log", tmp_path / "p.duckdb"
    code, output = run(log, "--store", store, "--log-line-prefix", "%t:%r:%u@%d:[%p]:")
    assert code == 2 and "matches none of the" in output and "omit it" in output
    code, output = run(log, "--store", store, "--log-line-prefix", "%m [%p] ")
    assert code == 2 and "matches only 11 of the 20 header lines" in output, output
    assert not store.exists()
    code, output = run(log, "--store", store, "--log-line-prefix", "%m [%p] %q%u@%d qid=%Q ")
    assert code == 0 and "7 plans from 1 files" in output, output


def test_a_gzip_cut_short_read_in_parallel_as_sequentially(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers import contents, ingest_with

    three = [LOGS / f"pg{major}" / "pg.log" for major in (15, 17, 18)]  # no range twice
    packed = gzip.compress(b"".join(log.read_bytes() for log in three))
    log = tmp_path / "cut.log.gz"
    log.write_bytes(packed[: len(packed) * 2 // 3])
    monkeypatch.setattr(autoexplain_log, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setattr(log_parallel, "CHUNK_BYTES", 30_000)
    monkeypatch.setattr(log_parallel, "TAIL_SEARCH", 500)
    sequential = ingest_with(tmp_path / "sequential.duckdb", log, workers=0)
    parallel = ingest_with(tmp_path / "parallel.duckdb", log, workers=2)
    assert parallel.plans == sequential.plans > 0
    assert [p.kind for p in parallel.problems] == [p.kind for p in sequential.problems]
    assert [p.kind for p in sequential.problems] == ["bad-gzip"]
    assert contents(tmp_path / "parallel.duckdb") == contents(tmp_path / "sequential.duckdb")
