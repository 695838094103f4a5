"""A run on a --dsn server: consent for setup comes from the command line, and what a workload
leaves behind outside its rolled-back transactions is named, with the query that did it.

One real PostgreSQL 17 cluster of this module's own (max_prepared_transactions > 0, dblink from
its contrib), a fresh database per test; every workload runs through the `planshift run` CLI.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from helpers import FreshDb
from typer.testing import CliRunner, Result

from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.installations import find_installation
from detector.cli.app import app
from detector.errors import PlanshiftError
from detector.store import Store

HEAD = """
[workload]
name = "effects"
repetitions = 3
warmup = 1

[setup]
sql = "CREATE TABLE IF NOT EXISTS t (id int PRIMARY KEY, v int)"
"""


@pytest.fixture(scope="module")
def pg17_prepared() -> Iterator[EmbeddedCluster]:
    try:
        installation = find_installation(17)
    except PlanshiftError as exc:
        pytest.skip(f"PostgreSQL 17 is not available ({exc})")
    cluster = EmbeddedCluster(
        installation,
        name="test-state",
        settings={"max_prepared_transactions": "4"},
    )
    with cluster:
        yield cluster


@pytest.fixture
def db(pg17_prepared: EmbeddedCluster, fresh_db: FreshDb) -> str:
    conninfo = fresh_db(pg17_prepared)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v int)")
        conn.execute("INSERT INTO t SELECT i, i % 10 FROM generate_series(1, 1000) i")
        conn.execute("CREATE EXTENSION dblink")
        conn.execute("CREATE EXTENSION pg_stat_statements")
        conn.execute("CREATE SEQUENCE ticket")
    return conninfo


def run(
    tmp_path: Path, conninfo: str, queries: str, *flags: str, head: str = HEAD, **env: str
) -> Result:
    """`planshift run` in this process (CliRunner: no interpreter start per run)."""
    workload = tmp_path / "workload.toml"
    workload.write_text(head + queries)
    command = [
        "run",
        str(workload),
        "--dsn",
        f"prod={conninfo}",
        "--store",
        str(tmp_path / "s.duckdb"),
    ]
    return CliRunner().invoke(app, [*command, *flags], env=env)


def query(name: str, sql: str) -> str:
    return f"\n[[queries]]\nname = {name!r}\nsql = {sql!r}\n"


def scalar(conninfo: str, sql: str) -> object:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(sql).fetchone()
    return row[0] if row else None


def assert_failed_naming(done: Result, name: str, *words: str) -> None:
    assert done.exit_code == 2, (done.stdout, done.stderr, done.exception)
    assert "Traceback" not in done.stderr
    assert (
        f"error: query {name} changed server prod outside its rolled-back transaction"
        in done.stderr
    )
    assert "(its first execution)" in done.stderr
    for word in words:
        assert word in done.stderr, done.stderr
    assert "\nhint: " in done.stderr


DESTRUCTIVE = HEAD.replace(
    'sql = "CREATE TABLE IF NOT EXISTS t (id int PRIMARY KEY, v int)"',
    'on_dsn = "run"\nsql = "DROP TABLE IF EXISTS t; CREATE TABLE t (id int PRIMARY KEY, v int)"',
)


def test_on_dsn_run_in_the_file_is_refused_without_setup_and_nothing_is_written(
    tmp_path: Path, db: str
) -> None:
    scan = query("scan", "SELECT count(*) FROM t")
    refused = run(tmp_path, db, scan, head=DESTRUCTIVE)
    assert refused.exit_code == 2, refused.stderr
    assert (
        "error: workload.toml asks to run its [setup] (2 statements) on --dsn target prod"
        in refused.stderr
    )
    assert "hint: pass --setup" in refused.stderr and "PLANSHIFT_ALLOW_SETUP=1" in refused.stderr
    assert scalar(db, "SELECT count(*) FROM t") == 1000  # the DROP TABLE did not run
    assert not (tmp_path / "s.duckdb").exists()
    assert run(tmp_path, db, scan, head=DESTRUCTIVE, PLANSHIFT_ALLOW_SETUP="yes").exit_code == 2

    consented = run(tmp_path, db, scan, "--setup", head=DESTRUCTIVE)
    assert consented.exit_code == 0, consented.stderr
    assert (
        "setup on prod (" in consented.stderr
        and "2 statements of workload.toml [setup]" in consented.stderr
    )
    assert "password" not in consented.stderr
    assert scalar(db, "SELECT count(*) FROM t") == 0  # consent given: the setup ran
    ci = run(tmp_path, db, scan, head=DESTRUCTIVE, PLANSHIFT_ALLOW_SETUP="1")
    assert ci.exit_code == 0 and "setup on prod (" in ci.stderr, ci.stderr


def test_a_clean_workload_passes_every_check(tmp_path: Path, db: str) -> None:
    done = run(tmp_path, db, query("scan", "SELECT count(*) FROM t WHERE v = 3"))
    assert done.exit_code == 0, done.stderr
    assert "warning" not in done.stderr
    with Store(tmp_path / "s.duckdb", read_only=True) as store:
        (target,) = store.targets()
    checked = target.info["server_state"]["checked"]
    assert {"slots", "settings", "file_settings", "pgss_reset", "prepared", "sessions"} <= set(
        checked
    )


def test_a_replication_slot_fails_the_run_naming_the_query(tmp_path: Path, db: str) -> None:
    slot = "SELECT pg_create_physical_replication_slot('planshift_leak')"
    try:
        done = run(tmp_path, db, query("scan", "SELECT 1") + query("slot", slot))
        assert_failed_naming(done, "slot", "replication slot planshift_leak appeared: physical")
        assert "pg_drop_replication_slot" in done.stderr
        assert (
            scalar(db, "SELECT count(*) FROM pg_replication_slots") == 1
        )  # it did outlive ROLLBACK
        with Store(tmp_path / "s.duckdb", read_only=True) as store:
            assert [r.status for r in store.runs()] == ["failed"]
    finally:
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots")


def test_a_pg_stat_statements_reset_fails_the_run(tmp_path: Path, db: str) -> None:
    done = run(tmp_path, db, query("reset", "SELECT pg_stat_statements_reset()"))
    assert_failed_naming(done, "reset", "reset of pg_stat_statements changed")


def test_alter_system_and_a_reload_through_dblink_fail_the_run(
    tmp_path: Path, db: str, pg17_prepared: EmbeddedCluster
) -> None:
    here = pg17_prepared.conninfo.replace("'", "''")
    sql = f"SELECT dblink_exec('{here}', 'ALTER SYSTEM SET work_mem = ''77MB'''), pg_reload_conf()"
    try:
        done = run(tmp_path, db, query("tune", sql))
        assert_failed_naming(done, "tune", "work_mem", "77MB")
    finally:
        with psycopg.connect(pg17_prepared.conninfo, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM RESET work_mem")
            conn.execute("SELECT pg_reload_conf()")


def test_a_prepared_transaction_and_a_session_left_fail_the_run(tmp_path: Path, db: str) -> None:
    here = db.replace("'", "''")
    prepare = f"SELECT dblink_exec('{here}', 'BEGIN; SELECT 1; PREPARE TRANSACTION ''px''')"
    try:
        done = run(tmp_path, db, query("prepare", prepare))
        assert_failed_naming(
            done, "prepare", "prepared transaction px appeared", "ROLLBACK PREPARED"
        )
    finally:
        with psycopg.connect(db, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_prepared_xacts WHERE gid = 'px'").fetchone():
                conn.execute("ROLLBACK PREPARED 'px'")
    done = run(tmp_path, db, query("connect", f"SELECT dblink_connect('leak', '{here}')"))
    assert_failed_naming(done, "connect", "is still connected", "pg_terminate_backend")


def test_an_advanced_sequence_is_a_warning_and_the_run_completes(tmp_path: Path, db: str) -> None:
    done = run(
        tmp_path, db, query("scan", "SELECT 1") + query("ticket", "SELECT nextval('ticket')")
    )
    assert done.exit_code == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert lines and all("query ticket on prod: sequence ticket advanced" in line for line in lines)
    assert "advanced (unused -> 1; nextval is not rolled back) (its first execution)" in lines[0]
    with Store(tmp_path / "s.duckdb", read_only=True) as store:
        (target,) = store.targets()
        assert [r.status for r in store.runs()] == ["complete"]
    assert list(target.info["server_state"]["warnings"]) == ["ticket"]


def test_many_sequences_are_read_once_at_the_end_of_the_run(tmp_path: Path, db: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            "DO $$ BEGIN FOR i IN 1..500 LOOP EXECUTE format('CREATE SEQUENCE s%s', i); END LOOP; END $$"
        )
    done = run(tmp_path, db, query("ticket", "SELECT nextval('s7')"))
    assert done.exit_code == 0, done.stderr
    assert "warning: the run on prod: sequence s7 advanced (unused -> 7;" in done.stderr
    with Store(tmp_path / "s.duckdb", read_only=True) as store:
        (target,) = store.targets()
    assert target.info["server_state"]["checked_at_the_end"] == ["sequences"]
