"""`planshift capture` from a real server that ran a pgbench load (simple and prepared
protocol), the workload it writes, its replay on two versions with production weights, and
that neither capture nor a plan-only replay writes to the source."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from typer.testing import CliRunner

from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.installations import find_installation
from detector.cli.app import app
from detector.engine.comparison.options import CompareOptions
from detector.errors import PlanshiftError
from detector.jobs.compare import compare_from_store
from detector.jobs.workload import load_workload
from detector.model.workload import Query
from detector.store import Store

pytestmark = pytest.mark.pg
SOURCE_SETTINGS = {
    "auto_explain.log_min_duration": "0",
    "auto_explain.log_format": "json",
    "auto_explain.log_analyze": "off",
    "log_line_prefix": "%m [%p] %q%u@%d ",
    "autovacuum": "off",  # nothing but the test writes
}
# a custom pgbench script: constants (simple protocol: in the logged text), a string literal
RANGE_SCRIPT = (
    "\\set a random(1, 90000)\n"
    "SELECT count(*) FROM pgbench_accounts WHERE aid BETWEEN :a AND :a + 50 AND filler <> 'x';\n"
)
# sent by psycopg as a server-side prepared statement: $1 in the logged text
PREPARED = "SELECT bid, sum(abalance) FROM pgbench_accounts WHERE bid = %s GROUP BY bid"
PREPARED_EXPRESSION = "SELECT count(*) FROM pgbench_branches WHERE bbalance > bid * %s"


class Source:
    def __init__(self, cluster: EmbeddedCluster, dsn: str) -> None:
        self.cluster, self.dsn = cluster, dsn

    @property
    def log(self) -> Path:
        """The server log: jsonlog files of the logging collector when on, else stderr's."""
        found = sorted((self.cluster.data_dir / "log").glob("*.json"))
        return found[-1] if found else self.cluster.log_path

    def one(self, sql: str) -> tuple[object, ...]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute(sql).fetchone()
        assert row is not None
        return tuple(row)

    def writes(self) -> tuple[object, ...]:
        """Rows this database's sessions inserted, updated and deleted."""
        return self.one(
            "SELECT tup_inserted, tup_updated, tup_deleted FROM pg_stat_database "
            "WHERE datname = current_database()"
        )


def pgbench(cluster: EmbeddedCluster, *arguments: str) -> None:
    binary = cluster.installation.bindir / "pgbench"
    if not binary.is_file():
        pytest.skip(f"no pgbench in {cluster.installation.bindir}")
    env = {**os.environ, "PGHOST": str(cluster.socket_dir), "PGPORT": str(cluster.port)}
    env["PGUSER"] = "postgres"
    subprocess.run([str(binary), *arguments, "bench"], env=env, check=True, capture_output=True)


def start_source(major: int, tmp: Path, **settings: str) -> Iterator[Source]:
    try:
        installation = find_installation(major)
    except PlanshiftError as exc:
        pytest.skip(f"PostgreSQL {major} is not available: {exc}")
    with EmbeddedCluster(
        installation, settings={**SOURCE_SETTINGS, **settings}, name=f"capture-src{major}"
    ) as cluster:
        with psycopg.connect(cluster.conninfo, autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
        source = Source(cluster, make_conninfo(cluster.conninfo, dbname="bench"))
        with psycopg.connect(source.dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        pgbench(cluster, "-i", "-s", "1", "-q")
        script = tmp / "range.sql"
        script.write_text(RANGE_SCRIPT)
        pgbench(cluster, "-M", "simple", "-S", "-t", "200")
        pgbench(cluster, "-M", "prepared", "-S", "-t", "200")
        pgbench(cluster, "-M", "simple", "-f", str(script), "-t", "100")
        pgbench(cluster, "-M", "prepared", "-N", "-t", "20")  # writes, not captured
        with psycopg.connect(source.dsn, autocommit=True) as conn:
            for _ in range(8):
                conn.execute(PREPARED, [1], prepare=True)
            for _ in range(3):
                conn.execute(PREPARED_EXPRESSION, [2], prepare=True)
            conn.execute("CREATE SCHEMA app")
            conn.execute("CREATE TABLE app.items AS SELECT i AS id FROM generate_series(1, 99) i")
            conn.execute("SET search_path = app, public")  # as the application's role has it
            for _ in range(4):
                conn.execute("SELECT count(*) FROM items WHERE id < 50")
            conn.execute("RESET search_path")
            conn.execute("CREATE TEMP TABLE scratch AS SELECT 1 AS x")
            for _ in range(30):
                conn.execute("SELECT count(*) FROM scratch WHERE x > 0")
            conn.execute("SELECT 'end of the load' AS marker")
        wait_for_log(source, "end of the load")
        yield source


def wait_for_log(source: Source, text: str, limit_s: float = 30.0) -> None:
    """The logging collector writes through a pipe: poll until the load's last entry is in."""
    deadline = time.monotonic() + limit_s
    while text not in source.log.read_text(errors="replace"):
        if time.monotonic() > deadline:
            pytest.fail(f"{text!r} not in {source.log} after {limit_s} s")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def source15(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    yield from start_source(15, tmp_path_factory.mktemp("src15"))


def capture(source: Source, out: Path, *extra: str) -> str:
    result = CliRunner().invoke(
        app,
        [
            "capture",
            "--target",
            source.dsn,
            "--log",
            str(source.log),
            "-o",
            str(out),
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_capture_writes_a_workload_that_replays_on_two_versions_with_weights(
    source15: Source, tmp_path: Path, pg17: EmbeddedCluster
) -> None:
    output = capture(source15, tmp_path / "cap", "--data", "--top", "20")
    workload = load_workload(tmp_path / "cap" / "workload.toml")
    queries = {q.name: q for q in workload.queries}

    def having(text: str) -> Query:
        return next(q for q in workload.queries if text in q.sql)

    lookup = having("WHERE aid = %(p1)s")
    calls = source15.one(
        "SELECT sum(calls)::int FROM pg_stat_statements "
        "WHERE query = 'SELECT abalance FROM pgbench_accounts WHERE aid = $1'"
    )[0]
    # simple (constants) and prepared (parameters) protocol: one query, calls summed
    assert lookup.calls == calls == 420
    assert [p.kind for p in lookup.params] == ["values"] and len(lookup.params[0].args) == 20
    assert all(isinstance(v, int) and 1 <= v <= 100000 for v in lookup.params[0].args)
    ranged = having("BETWEEN")
    assert "%(p1)s AND %(p2)s + %(p3)s AND filler <> %(p4)s" in ranged.sql
    assert {p.name: p.args[0] for p in ranged.params}["p4"] == "x"
    # PostgreSQL 15 logs no bound parameters, but a custom plan shows them: `(bid = 1)`
    grouped = having("GROUP BY")
    assert not grouped.generic_plan and grouped.calls == 8
    assert [set(p.args) for p in grouped.params] == [{"1"}]
    assert "with values read from their custom plan's conditions" in output
    # where the plan does not show them (`bid * $1`), the statement's plan is its generic one
    expression = having("bid * $1")
    assert expression.generic_plan and expression.calls == 3
    assert "missing parameters for 1 query: replayed as generic plans" in output
    # what it could not capture, said
    assert "write      UPDATE pgbench_accounts" in output or "write      INSERT" in output
    assert "scratch, which the capture session cannot see" in output
    assert not any(
        "scratch" in q.sql or q.sql.startswith(("UPDATE", "INSERT")) for q in queries.values()
    )
    store = tmp_path / "s.duckdb"
    run = CliRunner().invoke(
        app,
        ["run", str(workload.path), "-t", "pg15", "-t", "pg17", "--store", str(store),
         "--repetitions", "4", "--warmup", "0"],
    )  # fmt: skip
    assert run.exit_code == 0, run.output
    result = compare_from_store(store, "pg15", "pg17", None, CompareOptions())
    weights = {q.query_name: (q.baseline.calls, q.candidate.calls) for q in result.queries}
    assert weights[lookup.name] == (420, 420)
    assert weights == {q.name: (q.calls, q.calls) for q in workload.queries}
    shown = CliRunner().invoke(app, ["compare", "--store", str(store), "-v"])
    assert "production: 420 calls" in shown.output
    assert "queries by workload impact" in shown.output
    as_json = CliRunner().invoke(app, ["compare", "--store", str(store), "--format", "json"])
    document = json.loads(as_json.stdout)
    calls = {q["name"]: q["production_calls"] for q in document["queries"]}
    assert calls == {q.name: q.calls for q in workload.queries}


def test_capture_never_writes_to_the_source(source15: Source, tmp_path: Path) -> None:
    """As a role that may read everything and write nothing, every transaction read-only:
    a write would fail the capture; the database's write counters do not move."""
    with psycopg.connect(source15.dsn, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS reader")
        conn.execute("CREATE ROLE reader LOGIN IN ROLE pg_read_all_data, pg_read_all_stats")
        conn.execute("ALTER ROLE reader SET default_transaction_read_only = on")
    reader = Source(source15.cluster, make_conninfo(source15.dsn, user="reader"))
    before = source15.writes()
    capture(reader, tmp_path / "cap", "--data")
    assert (tmp_path / "cap" / "dump.sql").stat().st_size > 1000
    assert source15.writes() == before
    with psycopg.connect(source15.dsn, autocommit=True) as conn:
        sent = conn.execute(
            "SELECT query FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid "
            "WHERE r.rolname = 'reader'"
        ).fetchall()
    assert sent and not any(
        q.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE", "CREATE", "ALTER"))
        for (q,) in sent
    )


def test_plan_only_replay_on_the_source_executes_nothing(source15: Source, tmp_path: Path) -> None:
    capture(source15, tmp_path / "cap")  # schema only: replay where the data is
    executed = (
        "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE 'SELECT abalance%'"
    )
    calls, writes = source15.one(executed), source15.writes()
    store = tmp_path / "s.duckdb"
    result = CliRunner().invoke(
        app,
        ["run", str(tmp_path / "cap" / "workload.toml"), "--dsn", f"prod={source15.dsn}",
         "--plan-only", "--store", str(store), "--repetitions", "3"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert source15.one(executed) == calls
    assert source15.writes() == writes
    with Store(store, read_only=True) as db:
        rows = db._con.execute("SELECT count(*), count(duration_ms) FROM observations").fetchone()
    assert rows is not None and rows[0] > 0 and rows[1] == 0


def test_bound_parameters_of_16_and_later_become_values(tmp_path: Path) -> None:
    """PostgreSQL 17, logging in jsonlog: `Query Parameters` give the prepared statement's
    values, so it replays with them instead of as its generic plan."""
    jsonlog = {"logging_collector": "on", "log_destination": "jsonlog"}
    for source in start_source(17, tmp_path, **jsonlog):
        assert source.log.suffix == ".json"
        output = capture(source, tmp_path / "cap", "--top", "20")
        workload = load_workload(tmp_path / "cap" / "workload.toml")
        grouped = next(q for q in workload.queries if "GROUP BY" in q.sql)
        assert not grouped.generic_plan and [p.args for p in grouped.params] == [("1",) * 8]
        assert "missing parameters" not in output


def test_errors_are_user_errors(source15: Source, tmp_path: Path) -> None:
    too_big = CliRunner().invoke(
        app,
        ["capture", "--target", source15.dsn, "-o", str(tmp_path), "--data",
         "--max-data-mb", "0.5"],
    )  # fmt: skip
    assert too_big.exit_code == 2 and "too large to copy" in too_big.output
    with psycopg.connect(source15.cluster.conninfo, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS empty")
        conn.execute("CREATE DATABASE empty")
    bare = make_conninfo(source15.dsn, dbname="empty")
    missing = CliRunner().invoke(app, ["capture", "--target", bare, "-o", str(tmp_path)])
    assert missing.exit_code == 2 and "pg_stat_statements is not installed" in missing.output
    assert "Traceback" not in missing.output
    timeout = CliRunner().invoke(
        app,
        ["capture", "--target", source15.dsn, "-o", str(tmp_path), "--statement-timeout", "soon"],
    )
    assert timeout.exit_code == 2 and "PostgreSQL duration" in timeout.output


def test_a_password_in_the_dsn_reaches_no_file_and_no_output(
    source15: Source, tmp_path: Path
) -> None:
    secret = "hunter2-capture"  # trust authentication: the server never asks for it
    dsn = make_conninfo(source15.dsn, password=secret)
    output = capture(Source(source15.cluster, dsn), tmp_path / "cap", "--top", "5")
    assert secret not in output
    for path in (tmp_path / "cap").iterdir():
        assert secret not in path.read_text(), path


def test_a_query_the_source_cannot_plan_as_replayed_is_listed(
    source15: Source, tmp_path: Path
) -> None:
    """Without logs, the constants of `:a + 50` become a generic plan's `$2 + $3`, two
    unknown types: capture plans each query as the file will send it (plain EXPLAIN) and
    lists the one the source cannot plan, instead of writing a workload that fails."""
    result = CliRunner().invoke(
        app, ["capture", "--target", source15.dsn, "-o", str(tmp_path / "cap"), "--top", "50"]
    )
    assert result.exit_code == 0, result.output
    assert "unplannable SELECT count(*) FROM pgbench_accounts WHERE aid BETWEEN" in result.output
    assert "operator is not unique: unknown + unknown" in result.output
    workload = load_workload(tmp_path / "cap" / "workload.toml")
    assert not any("BETWEEN" in q.sql for q in workload.queries)


def test_a_schema_only_capture_replays_on_servers_holding_the_data(
    source15: Source, tmp_path: Path
) -> None:
    """--dsn servers (here the source itself under two names, as a restored and an upgraded
    copy would be): the schema is only checked there, the captured queries run with weights."""
    capture(source15, tmp_path / "cap", "--top", "5")
    store = tmp_path / "s.duckdb"
    result = CliRunner().invoke(
        app,
        ["run", str(tmp_path / "cap" / "workload.toml"), "--dsn", f"old={source15.dsn}",
         "--dsn", f"new={source15.dsn}", "--store", str(store), "--repetitions", "3"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    compared = compare_from_store(store, "old", "new", None, CompareOptions())
    timed = [q for q in compared.queries if q.baseline.timing is not None]
    assert timed and all(q.baseline.calls and q.weight == q.baseline.calls for q in timed)


def test_the_applications_search_path(source15: Source, tmp_path: Path) -> None:
    """Tables in a schema the capture role does not search are listed with a hint; with
    --search-path they are captured, and the replay sets it in every statement's transaction."""
    assert "reads items, which the capture session cannot see" in capture(
        source15, tmp_path / "plain", "--top", "50"
    )
    output = capture(source15, tmp_path / "cap", "--top", "50", "--search-path", "app, public")
    assert "reads items" not in output
    workload = load_workload(tmp_path / "cap" / "workload.toml")
    assert dict(workload.settings) == {"search_path": "app, public"}
    assert any("FROM items" in q.sql for q in workload.queries)
    result = CliRunner().invoke(
        app,
        ["run", str(workload.path), "--dsn", f"prod={source15.dsn}", "--plan-only",
         "--store", str(tmp_path / "s.duckdb"), "--repetitions", "1"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
