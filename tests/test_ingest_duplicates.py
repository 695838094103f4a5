"""Duplicate content by ranges, on real logs (tests/fixtures/logs): a log appended to itself, a
stored log concatenated after another one (a new file: the ledger does not know its head), a
stored file that grew by a copy of itself. The repeated range is not stored again and is
reported with where its content was first read; what is new is stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_log_managed import ingest, stored

from collectors.logs import autoexplain as autoexplain_log
from collectors.logs import parallel as log_parallel

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
PG17 = LOGS / "pg17" / "pg.log"
PG15 = LOGS / "pg15" / "pg.log"


def test_a_log_appended_to_itself_is_stored_once(tmp_path: Path) -> None:
    twice = tmp_path / "twice.log"
    twice.write_bytes(PG17.read_bytes() * 2)
    report = ingest(tmp_path / "twice.duckdb", twice)
    ingest(tmp_path / "once.duckdb", PG17)
    assert stored(tmp_path / "twice.duckdb") == stored(tmp_path / "once.duckdb")
    lines = PG17.read_bytes().count(b"\n")
    (problem,) = report.problems
    assert (problem.kind, report.plans) == ("duplicate", 44)
    assert problem.message.startswith(f"lines {lines + 5}-")
    assert ": 44 plans already stored from twice.log lines 5-" in problem.message


def test_a_stored_log_inside_a_new_file_is_not_stored_again(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    ingest(store, PG17)
    both = tmp_path / "pg15-then-pg17.log"  # another head: a new file for the ledger
    both.write_bytes(PG15.read_bytes() + PG17.read_bytes())
    report = ingest(store, both)
    assert report.plans == 44  # PostgreSQL 15's
    assert [p.kind for p in report.problems] == ["duplicate"]
    assert "44 plans already stored from pg.log lines 5-" in report.problems[0].message
    ingest(tmp_path / "apart.duckdb", PG17)
    ingest(tmp_path / "apart.duckdb", PG15)
    plans, events = stored(store)
    apart_plans, apart_events = stored(tmp_path / "apart.duckdb")
    assert sorted(plans, key=repr) == sorted(apart_plans, key=repr)
    assert sorted(events, key=repr) == sorted(apart_events, key=repr)


def test_a_file_grown_by_a_copy_of_itself_stores_nothing_new(tmp_path: Path) -> None:
    log = tmp_path / "postgresql.log"
    log.write_bytes(PG17.read_bytes())
    store = tmp_path / "s.duckdb"
    first = ingest(store, log)
    before = stored(store)
    log.write_bytes(PG17.read_bytes() * 2)
    grown = ingest(store, log)
    assert (first.plans, grown.plans) == (44, 0)
    assert [p.kind for p in grown.problems] == ["duplicate"]
    assert stored(store) == before


def test_worker_processes_drop_the_same_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    twice = tmp_path / "twice.log"
    twice.write_bytes(PG17.read_bytes() * 2)
    sequential = ingest(tmp_path / "one.duckdb", twice)
    monkeypatch.setattr(autoexplain_log, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setattr(log_parallel, "CHUNK_BYTES", 8 << 10)
    parallel = ingest(tmp_path / "two.duckdb", twice, workers=2)
    assert stored(tmp_path / "two.duckdb") == stored(tmp_path / "one.duckdb")
    assert parallel.plans == sequential.plans == 44
    assert sum(p.message.count(" plans already stored") for p in parallel.problems) >= 1
