"""Managed services' logs (tests/fixtures/logs/managed, see capture_managed.py): Amazon RDS's
fixed stderr prefix and a server without logging_collector, captured from real PostgreSQL 15
and 18 running the events workload; CloudNativePG and Cloud SQL JSON envelopes, transformed
from those captures. Each is detected, read sequentially and by worker processes, and its
timeline names the setting change that flipped the plan; an envelope reads exactly as the
log it wraps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from collectors.logs import autoexplain as autoexplain_log
from collectors.logs import parallel as log_parallel
from collectors.logs.autoexplain import IngestOptions, LogIngest
from collectors.logs.registry import FORMATS, detect_format
from detector.cli.app import app
from detector.store import Store

MANAGED = Path(__file__).resolve().parent / "fixtures" / "logs" / "managed"
EVENTS = Path(__file__).resolve().parent / "fixtures" / "logs" / "events"
# file -> (detected format, major version, the file it wraps)
CASES = {
    "rds15.log": ("rds", "15.", None),
    "pg15.json": ("jsonlog", "15.", None),
    "nocollector18.log": ("stderr", "18.", None),
    "cnpg.json": ("cnpg", "15.", "pg15.json"),
    "cloudsql.json": ("cloudsql", "18.", "nocollector18.log"),
}
SETTING = 'parameter "random_page_cost" changed to "60"'


def ingest(store_path: Path, log: Path, workers: int = 1) -> Any:
    with Store(store_path) as store:
        run_id = store.begin_run("managed test", workload_hash=None, tool_version="t", host="h")
        target = store.add_target(
            run_id, "log", source="log", server_version_num=None, gucs={}, info={}
        )
        options = IngestOptions(batch_size=7, workers=workers)
        report = LogIngest(store, target, options).ingest(log)
        store.finish_run(run_id)
    return report


def stored(store_path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """What an ingest stored, without file positions: plans and events."""
    with Store(store_path, read_only=True) as store:
        plans = [
            (r.row.query_key, r.row.fingerprint, r.row.duration_ms, r.row.collected_at,
             r.pid, r.database, r.queryid, r.settings)
            for r in store.log_observations()
        ]  # fmt: skip
        events = [
            (e.kind, e.subject, e.value, e.logged_at, e.pid, e.message) for e in store.log_events()
        ]
    return plans, events


@pytest.mark.parametrize("name", sorted(CASES))
def test_detected_read_and_the_flip_named(name: str, tmp_path: Path) -> None:
    log_format, version, _ = CASES[name]
    assert detect_format((MANAGED / name).read_bytes()[:65536]) == log_format
    store = tmp_path / "s.duckdb"
    runner = CliRunner()
    done = runner.invoke(app, ["ingest", str(MANAGED / name), "--store", str(store), "-j", "1"])
    assert done.exit_code == 0, done.output
    assert f"{name}: {log_format}: " in done.output and " 61 plans stored" in done.output
    assert ", 0 problems" in done.output
    shown = runner.invoke(app, ["timeline", "--store", str(store), "--query", "items"])
    (flip,) = [line for line in shown.output.splitlines() if ">> FLIP" in line]
    assert f"after: {SETTING} at " in flip and f" of {name})" in flip
    assert "plan Settings: random_page_cost default -> 60" in flip
    plans, events = stored(store)
    assert {plan[5] for plan in plans} == {"postgres"}  # the database of every plan
    assert any(e[0] == "start" and (e[1] or "").startswith(version) for e in events)
    kinds = {"setting", "reload", "start", "autovacuum", "autoanalyze", "ddl"}
    assert {e[0] for e in events} == kinds  # every event kind, on 15 and 18
    again = runner.invoke(app, ["ingest", str(MANAGED / name), "--store", str(store), "-j", "1"])
    assert "0 plans from 1 files" in again.output  # the ledger knows the file
    assert stored(store) == (plans, events)


@pytest.mark.parametrize("name", ["cnpg.json", "cloudsql.json"])
def test_an_envelope_reads_as_the_log_it_wraps(name: str, tmp_path: Path) -> None:
    wrapped = CASES[name][2]
    assert wrapped is not None
    ingest(tmp_path / "envelope.duckdb", MANAGED / name)
    ingest(tmp_path / "plain.duckdb", MANAGED / wrapped)
    assert stored(tmp_path / "envelope.duckdb") == stored(tmp_path / "plain.duckdb")


@pytest.mark.parametrize("name", ["rds15.log", "cnpg.json", "cloudsql.json"])
def test_worker_processes_read_managed_logs_the_same(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(tmp_path / "one.duckdb", MANAGED / name)
    monkeypatch.setattr(autoexplain_log, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setattr(log_parallel, "CHUNK_BYTES", 8 << 10)
    ingest(tmp_path / "two.duckdb", MANAGED / name, workers=2)
    assert stored(tmp_path / "two.duckdb") == stored(tmp_path / "one.duckdb")


def test_rds_prefix_gives_user_and_database_guessing_misses(tmp_path: Path) -> None:
    ingest(tmp_path / "rds.duckdb", MANAGED / "rds15.log")
    with Store(tmp_path / "rds.duckdb", read_only=True) as store:
        rows = store.log_observations()
    assert rows and all((r.database, r.pid) != (None, None) for r in rows)
    forced = CliRunner().invoke(
        app,
        ["ingest", str(MANAGED / "rds15.log"), "--store", str(tmp_path / "g.duckdb"),
         "--format", "stderr", "-j", "1"],
    )  # fmt: skip
    assert forced.exit_code == 0 and ": stderr: " in forced.output
    with Store(tmp_path / "g.duckdb", read_only=True) as store:
        assert {r.database for r in store.log_observations()} == {None}


def test_other_logs_keep_their_format_and_unknown_names_are_refused(tmp_path: Path) -> None:
    for name, expected in (("pg.log", "stderr"), ("pg.csv", "csvlog"), ("pg.json", "jsonlog")):
        assert detect_format((EVENTS / name).read_bytes()[:65536]) == expected
    assert set(FORMATS) >= {"stderr", "csvlog", "jsonlog", "rds", "cnpg", "cloudsql"}
    refused = CliRunner().invoke(
        app,
        ["ingest", str(MANAGED / "rds15.log"), "--store", str(tmp_path / "s.duckdb"),
         "--format", "eventlog"],
    )  # fmt: skip
    assert refused.exit_code == 2 and "unknown log format 'eventlog'" in refused.output


def test_cloudsql_json_payload_reads_as_the_jsonlog_it_carries(tmp_path: Path) -> None:
    """A Cloud Logging entry may carry the server's jsonlog record as `jsonPayload`."""
    entries = [
        json.dumps({"insertId": f"j{n}", "logName": "projects/p/logs/cloudsql.googleapis.com"
                    "%2Fpostgres.log", "jsonPayload": json.loads(line)})
        for n, line in enumerate((MANAGED / "pg15.json").read_text().splitlines())
    ]  # fmt: skip
    log = tmp_path / "payload.json"
    log.write_text("\n".join(entries) + "\n")
    assert detect_format(log.read_bytes()[:65536]) == "cloudsql"
    ingest(tmp_path / "envelope.duckdb", log)
    ingest(tmp_path / "plain.duckdb", MANAGED / "pg15.json")
    assert stored(tmp_path / "envelope.duckdb") == stored(tmp_path / "plain.duckdb")
