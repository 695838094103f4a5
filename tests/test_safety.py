"""Hostile workloads on a real server: nothing escapes the rolled-back transaction or leaks
between sides, distinct queries stay distinct, and a --dsn server is not set up unasked."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from helpers import FreshDb

from collectors.runner import RunOptions, run_workload
from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.targets import Server, open_servers, resolve_target_specs
from collectors.session import connect
from detector.errors import PlanshiftError
from detector.jobs.workload import load_workload
from detector.model.workload import Query
from detector.store import Store

HEAD = """
[workload]
name = "hostile"
repetitions = 2
warmup = 0

[setup]
sql = "CREATE TABLE IF NOT EXISTS t (id int PRIMARY KEY, v int, s text)"

[variants.a]
random_page_cost = "4"
[variants.b]
random_page_cost = "1.1"
work_mem = "8MB"
"""
ROWS = "INSERT INTO t SELECT i, i % 100, 'PROMO' || i FROM generate_series(1, 1000) i"


def prepared_db(cluster: EmbeddedCluster, fresh_db: FreshDb) -> str:
    conninfo = fresh_db(cluster)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v int, s text)")
        conn.execute(ROWS)
        conn.execute("ANALYZE t")
    return conninfo


def rows_in_t(conninfo: str) -> int:
    with psycopg.connect(conninfo) as conn:
        row = conn.execute("SELECT count(*) FROM t").fetchone()
    return int(row[0]) if row else -1


def run_text(
    tmp_path: Path, conninfo: str, text: str, options: RunOptions | None = None
) -> tuple[Store, int]:
    path = tmp_path / "workload.toml"
    path.write_text(text)
    return run_loaded(tmp_path, conninfo, load_workload(path), options)


def run_loaded(
    tmp_path: Path, conninfo: str, workload: object, options: RunOptions | None = None
) -> tuple[Store, int]:
    from detector.model.workload import Workload

    assert isinstance(workload, Workload)
    specs = resolve_target_specs(workload.targets, [], {"local": conninfo})
    store = Store(tmp_path / "store.duckdb")
    try:
        with open_servers(specs, dsns={"local": conninfo}) as servers:
            run_id = run_workload(workload, servers, store, options or RunOptions())
    except BaseException:
        store.close()
        raise
    return store, run_id


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1; COMMIT; DELETE FROM t",
        "SELECT 1; COMMIT; SET random_page_cost = '1000'",
        "SELECT 1; PREPARE p AS SELECT 1",
    ],
)
def test_several_statements_cannot_end_the_rolled_back_transaction(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb, sql: str
) -> None:
    conninfo = prepared_db(pg15, fresh_db)
    text = HEAD + f'[[queries]]\nname = "escape"\nsql = "{sql}"\n'
    with pytest.raises(PlanshiftError, match="statements in one query"):
        run_text(tmp_path, conninfo, text)
    # past the loader (a file edited after loading, a Python caller): the protocol refuses it
    (tmp_path / "w.toml").write_text(HEAD + '[[queries]]\nname = "escape"\nsql = "SELECT 1"\n')
    workload = load_workload(tmp_path / "w.toml")
    hostile = replace(workload, queries=(Query(name="escape", sql=sql),))
    store, run_id = run_loaded(tmp_path, conninfo, hostile)
    with store:  # refused on every side, recorded as the query's failure (42601), not run
        failures = store.query_failures([t.target_id for t in store.targets([run_id])])
        assert failures and {f.sqlstate for f in failures} == {"42601"}
        assert {f.message for f in failures} == {
            "cannot insert multiple commands into a prepared statement"
        }
        assert not store.observations([t.target_id for t in store.targets([run_id])])
    assert rows_in_t(conninfo) == 1000


def test_writes_and_session_changes_are_rolled_back_and_sides_keep_their_settings(
    tmp_path: Path, pg17: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    conninfo = prepared_db(pg17, fresh_db)
    text = (
        HEAD
        + """
[[queries]]
name = "delete"
sql = "DELETE FROM t WHERE id > 10"

[[queries]]
name = "session_setting"
sql = "SELECT set_config('enable_seqscan', 'off', false), set_config('random_page_cost', '1000', false)"

[[queries]]
name = "lock"
sql = "SELECT pg_advisory_lock(42)"

[[queries]]
name = "scan"
sql = "SELECT count(*) FROM t WHERE id > 10"
"""
    )
    store, run_id = run_text(tmp_path, conninfo, text)
    assert rows_in_t(conninfo) == 1000
    with store:
        assert store.runs()[-1].status == "complete"
        targets = {t.target_id: t.name for t in store.targets([run_id])}
        names = {key: query.name for key, query in store.queries().items()}
        scans = [o for o in store.observations(list(targets)) if names[o.query_key] == "scan"]
        assert len(scans) == 2 * 2
        # a leaked enable_seqscan = off would turn this scan of 99% of the table into an index scan
        assert {store.plan_record(o.fingerprint).signature for o in scans} == {
            "Aggregate > SeqScan(t)"
        }


def test_a_settings_change_from_outside_mid_run_fails_the_run(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    conninfo = prepared_db(pg15, fresh_db)
    text = HEAD + '[[queries]]\nname = "scan"\nsql = "SELECT count(*) FROM t WHERE id > 10"\n'
    path = tmp_path / "workload.toml"
    path.write_text(text.replace("repetitions = 2", "repetitions = 6"))
    workload = load_workload(path)
    specs = resolve_target_specs(workload.targets, [], {"local": conninfo})
    executions = 0

    def meddle(description: str, steps: int) -> None:
        nonlocal executions
        executions += steps
        if executions == 5:
            with psycopg.connect(pg15.conninfo, autocommit=True) as admin:
                admin.execute("ALTER SYSTEM SET enable_seqscan = off")
                admin.execute("SELECT pg_reload_conf()")

    try:
        with (
            open_servers(specs, dsns={"local": conninfo}) as servers,
            Store(tmp_path / "s.duckdb") as store,
            pytest.raises(PlanshiftError, match="changed during the run"),
        ):
            run_workload(workload, servers, store, RunOptions(), meddle)
    finally:
        with psycopg.connect(pg15.conninfo, autocommit=True) as admin:
            admin.execute("ALTER SYSTEM RESET enable_seqscan")
            admin.execute("SELECT pg_reload_conf()")


def test_queries_differing_only_in_constants_stay_two_queries(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    conninfo = prepared_db(pg15, fresh_db)
    text = (
        HEAD
        + """
[[queries]]
name = "v1"
sql = "SELECT count(*) FROM t WHERE v = 1"

[[queries]]
name = "v50"
sql = "SELECT count(*) FROM t WHERE v = 50 /* the same shape */"
"""
    )
    store, run_id = run_text(tmp_path, conninfo, text)
    with store:
        queries = store.queries()
        assert sorted(q.name for q in queries.values()) == ["v1", "v50"]
        counts: dict[str, int] = {}
        for obs in store.observations([t.target_id for t in store.targets([run_id])]):
            counts[queries[obs.query_key].name] = counts.get(queries[obs.query_key].name, 0) + 1
        assert counts == {"v1": 4, "v50": 4}


def test_a_literal_percent_is_sent_as_written(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    conninfo = prepared_db(pg15, fresh_db)
    text = (
        HEAD
        + """
[[queries]]
name = "like"
sql = "SELECT count(*) FROM t WHERE s LIKE 'PROMO%' AND v % 7 = 0"

[[queries]]
name = "bound"
sql = "SELECT count(*) FROM t WHERE id = %(id)s AND s LIKE 'PROMO%%'"
params = { id = { range = [1, 1000] } }
"""
    )
    store, run_id = run_text(tmp_path, conninfo, text)
    with store:
        assert store.runs()[-1].status == "complete"
        assert len(store.observations([t.target_id for t in store.targets([run_id])])) == 8


def test_setup_does_not_run_on_a_dsn_server_unless_asked(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    conninfo = prepared_db(pg15, fresh_db)
    destructive = HEAD.replace(
        'sql = "CREATE TABLE IF NOT EXISTS t (id int PRIMARY KEY, v int, s text)"',
        "sql = '''\nDROP TABLE IF EXISTS t;\nCREATE TABLE t (id int PRIMARY KEY, v int, s text);\n'''",
    )
    text = destructive + '[[queries]]\nname = "scan"\nsql = "SELECT count(*) FROM t"\n'
    run_text(tmp_path, conninfo, text)
    assert rows_in_t(conninfo) == 1000  # the DROP TABLE did not run

    empty = fresh_db(pg15)
    with pytest.raises(PlanshiftError, match="lacks t, which the workload's") as caught:
        run_text(tmp_path, empty, text)
    assert "--setup" in (caught.value.hint or "")

    run_text(tmp_path, empty, text, RunOptions(setup_on_dsn=True))
    assert rows_in_t(empty) == 0
    asking = text.replace("[setup]", '[setup]\non_dsn = "run"')
    with pytest.raises(PlanshiftError, match='on_dsn = "run"'):  # the file cannot consent
        run_text(tmp_path, conninfo, asking)
    assert rows_in_t(conninfo) == 1000
    run_text(tmp_path, conninfo, asking, RunOptions(setup_on_dsn=True))
    assert rows_in_t(conninfo) == 0  # the command line consented: the setup ran


def test_sessions_are_named_planshift(pg15: EmbeddedCluster) -> None:
    server = Server(name="pg15", conninfo=pg15.conninfo, source="embedded")
    with connect(server) as conn:
        row = conn.execute(
            "SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()"
        ).fetchone()
    assert row == ("planshift",)


@pytest.mark.parametrize("timing", ["off", "on", "plain"])
def test_timing_modes_measure_each_sample_and_say_how(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb, timing: str
) -> None:
    conninfo = prepared_db(pg15, fresh_db)
    text = (
        HEAD.replace("warmup = 0", f'warmup = 0\ntiming = "{timing}"')
        + """
[[queries]]
name = "join"
sql = "SELECT count(*) FROM t a JOIN t b USING (v) WHERE a.id < %(n)s"
params = { n = { range = [10, 200] } }

[[queries]]
name = "write"
sql = "UPDATE t SET v = v + 1 WHERE id = 1"
"""
    )
    store, run_id = run_text(tmp_path, conninfo, text)
    with store:
        targets = store.targets([run_id])
        assert {t.info["timing"] for t in targets} == {timing}
        rows = store.observations([t.target_id for t in targets])
        assert len(rows) == 2 * 2 * 2 and all(r.duration_ms and r.duration_ms > 0 for r in rows)
        plan = store.plan(next(r.fingerprint for r in rows if r.duration_ms))
        node_times = [node.actual_total_ms for _, node in plan.nodes()]
        assert all(t is None for t in node_times) == (timing != "on")
        if timing == "plain":  # the client's wall time, not the server's Execution Time
            assert all(r.duration_ms == r.client_ms for r in rows)
    assert rows_in_t(conninfo) == 1000


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--repetitions=-1"], "--repetitions -1"),
        (["--repetitions=0"], "--repetitions 0"),
        (["--warmup=-1"], "--warmup -1"),
        (["--repetitions=1000000000"], "--repetitions 1000000000: at most 10,000"),
        (["--warmup=5000"], "--warmup 5000: at most 1,000"),
    ],
)
def test_counts_on_the_command_line_must_be_positive(
    tmp_path: Path, flags: list[str], problem: str
) -> None:
    from typer.testing import CliRunner

    from detector.cli.app import app

    path = tmp_path / "w.toml"
    path.write_text(HEAD + '[[queries]]\nname = "q"\nsql = "SELECT 1"\n')
    result = CliRunner().invoke(
        app, ["run", str(path), "--store", str(tmp_path / "s.duckdb"), *flags]
    )
    assert result.exit_code == 2
    assert f"error: {problem}" in result.output and "hint:" in result.output
    assert not (tmp_path / "s.duckdb").exists()
