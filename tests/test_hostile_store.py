"""Store files that are not what they claim: every command refuses them with error:/hint: and exit 2.

A store is data, never code: a view over a file, a macro shadowing a built-in, a SQLite file that
would make DuckDB fetch an extension, a truncated or scrambled file, a path under a file, a newer
schema. None of them may print a traceback, exit 1 (findings) or leak what a view would read.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner, Result

from detector.cli.app import app
from detector.errors import PlanshiftError
from detector.store import Store

SECRET = "planshift-test-secret-7c1f"


def real_store(path: Path, runs: int = 3) -> Path:
    with Store(path) as store:
        for number in range(runs):
            run_id = store.begin_run(
                f"run {number}", workload_hash=None, tool_version="0", host="h"
            )
            store.add_target(
                run_id, "pg15", source="embedded", server_version_num=150000, gucs={}, info={}
            )
            store.finish_run(run_id)
    return path


def truncated(tmp: Path) -> Path:
    path = real_store(tmp / "truncated.duckdb")
    os.truncate(path, 300_000)
    return path


def scrambled(tmp: Path) -> Path:
    path = real_store(tmp / "scrambled.duckdb")
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.seek(12_288)
        file.write(bytes((i * 131 + 7) % 251 for i in range(size - 12_288)))
    return path


def garbage(tmp: Path) -> Path:
    path = tmp / "garbage.duckdb"
    path.write_bytes(bytes((i * 97 + 13) % 256 for i in range(100_000)))
    return path


def sqlite_file(tmp: Path) -> Path:
    path = tmp / "app.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (x)")
    return path


def text_file(tmp: Path) -> Path:
    path = tmp / "notes.duckdb"
    path.write_text("my notes\n")
    return path


def under_a_file(tmp: Path) -> Path:
    (tmp / "notes.txt").write_text("my notes\n")
    return tmp / "notes.txt" / "planshift.duckdb"


def newer_schema(tmp: Path) -> Path:
    path = real_store(tmp / "newer.duckdb")
    with duckdb.connect(str(path)) as con:
        con.execute("INSERT INTO schema_version VALUES (99, 'future', now())")
    return path


def view_over_a_file(tmp: Path) -> Path:
    path = real_store(tmp / "view.duckdb")
    secret = tmp / "secret.txt"
    secret.write_text(SECRET + "\n")
    with duckdb.connect(str(path)) as con:
        con.execute("DROP TABLE runs")
        con.execute(
            "CREATE VIEW runs AS SELECT 1::BIGINT AS run_id, content AS label, "
            "now()::TIMESTAMP AS started_at, NULL::TIMESTAMP AS finished_at, "
            "'complete' AS status, '' AS tool_version, NULL::VARCHAR AS workload_hash, "
            f"'' AS host FROM read_text('{secret}')"
        )
    return path


def shadowing_macro(tmp: Path) -> Path:
    path = real_store(tmp / "macro.duckdb")
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE MACRO coalesce(a, b) AS 'shadowed'")
    return path


STORES: dict[str, Callable[[Path], Path]] = {
    "truncated": truncated,
    "scrambled": scrambled,
    "garbage": garbage,
    "sqlite": sqlite_file,
    "text": text_file,
    "under-a-file": under_a_file,
    "newer-schema": newer_schema,
    "view-over-a-file": view_over_a_file,
    "shadowing-macro": shadowing_macro,
}


def commands(store: Path, tmp: Path) -> dict[str, list[str]]:
    log = tmp / "postgresql.log"
    log.write_text("2024-05-01 12:00:00.000 UTC [1] LOG:  database system is ready\n")
    workload = tmp / "w.toml"
    workload.write_text('[workload]\nname = "w"\n\n[[queries]]\nname = "one"\nsql = "SELECT 1"\n')
    dsn = "local=host=/nonexistent-planshift-socket dbname=x"
    return {
        "runs": ["runs", "--store", str(store)],
        "compare": ["compare", "-b", "a", "-c", "b", "--store", str(store)],
        "census": ["census", "--store", str(store)],
        "timeline": ["timeline", "--store", str(store)],
        "approve": ["approve", "-t", "pg15", "--store", str(store), "--file", str(tmp / "l")],
        "ingest": ["ingest", str(log), "--store", str(store)],
        "run": ["run", str(workload), "--dsn", dsn, "--store", str(store)],
    }


def assert_user_error(result: Result, *, leak: str | None = None) -> str:
    exit_code, stdout, stderr, exception = (
        result.exit_code,
        result.stdout,
        result.stderr,
        result.exception,
    )
    assert exit_code == 2, (exit_code, stdout, stderr, exception)
    assert not isinstance(exception, Exception) or isinstance(exception, SystemExit), exception
    assert stderr.startswith("error: ") and "\nhint: " in stderr, stderr
    assert "Traceback" not in stdout + stderr
    if leak is not None:
        assert leak not in stdout + stderr
    return str(stderr)


@pytest.mark.parametrize("kind", sorted(STORES))
@pytest.mark.parametrize(
    "command", ["runs", "compare", "census", "timeline", "approve", "ingest", "run"]
)
def test_every_command_refuses_a_hostile_store(tmp_path: Path, kind: str, command: str) -> None:
    store = STORES[kind](tmp_path)
    before = store.read_bytes() if store.is_file() else None
    result = CliRunner().invoke(app, commands(store, tmp_path)[command])
    assert_user_error(result, leak=SECRET)
    after = store.read_bytes() if store.is_file() else None
    assert after == before, "a refused store is not written to"


def test_a_view_over_a_file_is_never_read(tmp_path: Path) -> None:
    store = view_over_a_file(tmp_path)
    stderr = assert_user_error(CliRunner().invoke(app, ["runs", "--store", str(store)]))
    assert "view runs" in stderr


def test_a_sqlite_file_is_named_as_such_and_no_extension_is_loaded(tmp_path: Path) -> None:
    store = sqlite_file(tmp_path)
    stderr = assert_user_error(CliRunner().invoke(app, ["runs", "--store", str(store)]))
    assert "SQLite" in stderr and "extension" not in stderr


def test_a_store_cannot_reach_files_or_extensions(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text(SECRET)
    with Store(tmp_path / "s.duckdb") as store:
        for sql in (
            f"SELECT * FROM read_text('{tmp_path / 'secret.txt'}')",
            "INSTALL sqlite",
            "SET enable_external_access = true",
        ):
            with pytest.raises((PlanshiftError, duckdb.Error)):
                store._con.execute(sql).fetchall()
    real_store(tmp_path / "other.duckdb")  # and writing stores still works


def test_a_failing_command_leaves_no_new_store_behind(tmp_path: Path) -> None:
    store = tmp_path / "new" / "dir" / "planshift.duckdb"
    workload = tmp_path / "unset.toml"
    workload.write_text(
        '[workload]\nname = "w"\n\n[[targets]]\nname = "prod"\n'
        'dsn_env = "PLANSHIFT_TEST_NEVER_SET"\n\n[[queries]]\nname = "one"\nsql = "SELECT 1"\n'
    )
    result = CliRunner().invoke(app, ["run", str(workload), "--store", str(store)])
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    assert "PLANSHIFT_TEST_NEVER_SET is not set" in result.stderr
    assert "Traceback" not in result.stderr
    assert not store.exists() and not (tmp_path / "new").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["unset.toml"]  # no hidden file either


def test_a_run_that_fails_keeps_its_new_store_with_the_run_marked_failed(tmp_path: Path) -> None:
    store = tmp_path / "new" / "planshift.duckdb"
    result = CliRunner().invoke(app, commands(store, tmp_path)["run"])  # no server at that DSN
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    assert "Traceback" not in result.stderr
    with Store(store, read_only=True) as kept:
        assert [(r.label, r.status) for r in kept.runs()] == [("w", "failed")]


def test_a_store_with_data_is_kept_when_a_later_command_fails(tmp_path: Path) -> None:
    store = real_store(tmp_path / "s.duckdb")
    result = CliRunner().invoke(app, commands(store, tmp_path)["run"])
    assert result.exit_code == 2
    with Store(store, read_only=True) as reopened:
        assert [r.label for r in reopened.runs()][:3] == ["run 0", "run 1", "run 2"]


def test_a_dba_table_beside_planshift_tables_is_left_alone(tmp_path: Path) -> None:
    store = real_store(tmp_path / "s.duckdb")
    with duckdb.connect(str(store)) as con:
        con.execute("CREATE TABLE my_notes (note VARCHAR)")
        con.execute("CREATE VIEW my_runs AS SELECT run_id FROM runs")
    result = CliRunner().invoke(app, ["runs", "--store", str(store)])
    assert result.exit_code == 0, result.stderr
    assert "run 2" in result.stdout
