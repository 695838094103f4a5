from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import psycopg
import pytest
from helpers import FreshDb
from psycopg.conninfo import make_conninfo

from collectors.failures import GIVE_UP_AFTER
from collectors.runner import RunOptions, plan_count, run_workload
from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.targets import (
    Server,
    open_servers,
    redact_conninfo,
    resolve_target_specs,
)
from collectors.session import SettingsRefused, connect, one_statement, reset_session
from detector.errors import PlanshiftError
from detector.jobs.workload import load_workload
from detector.store import Store

WORKLOAD = """
[workload]
name = "runner-test"
repetitions = 4
warmup = 1

[setup]
sql = '''
DROP TABLE IF EXISTS t;
CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO t SELECT i, i % 100 FROM generate_series(1, 20000) i;
VACUUM ANALYZE t;
'''

[variants.index]
enable_bitmapscan = "off"
[variants.bitmap]
enable_indexscan = "off"
enable_indexonlyscan = "off"

[[queries]]
name = "range"
sql = "SELECT sum(v) FROM t WHERE id BETWEEN %(lo)s AND %(lo)s + 500"
params = { lo = { range = [1, 19000] } }

[[queries]]
name = "write"
sql = "UPDATE t SET v = -1 WHERE id = %(id)s"
params = { id = { values = [7] } }
"""


def run(tmp_path: Path, conninfo: str, text: str = WORKLOAD) -> tuple[Store, int]:
    path = tmp_path / "workload.toml"
    path.write_text(text)
    workload = load_workload(path)
    specs = resolve_target_specs(workload.targets, [], {"local": conninfo})
    store = Store(tmp_path / "store.duckdb")
    with open_servers(specs, dsns={"local": conninfo}) as servers:
        run_id = run_workload(workload, servers, store, RunOptions(setup_on_dsn=True))
    return store, run_id


def test_runner_stores_every_execution_of_every_side(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    store, run_id = run(tmp_path, fresh_db(pg15))
    with store:
        targets = {t.name: t for t in store.targets([run_id])}
        assert set(targets) == {"index", "bitmap"}
        assert targets["bitmap"].gucs == {"enable_indexscan": "off", "enable_indexonlyscan": "off"}
        assert (targets["index"].server_version_num or 0) // 10000 == 15
        assert targets["index"].info["tables"]["t"]["rows"] == 20000
        rows = store.observations([t.target_id for t in targets.values()])
        assert len(rows) == 2 * 2 * 4  # queries x sides x repetitions (warm-up not stored)
        signatures: dict[tuple[str, str], set[str]] = defaultdict(set)
        queries = store.queries()
        for row in rows:
            side = "index" if row.target_id == targets["index"].target_id else "bitmap"
            signatures[(queries[row.query_key].name, side)].add(
                store.plan_record(row.fingerprint).signature
            )
            assert row.duration_ms is not None and row.duration_ms > 0
            assert row.client_ms is not None and row.client_ms >= row.duration_ms
        assert signatures[("range", "index")] == {"Aggregate > IndexScan(t t_pkey)"}
        assert signatures[("range", "bitmap")] == {
            "Aggregate > BitmapHeapScan(t) > BitmapIndexScan(t_pkey)"
        }
        # the variant's GUCs were in effect: EXPLAIN (SETTINGS) lists them
        bitmap_plan = next(
            store.plan(r.fingerprint) for r in rows if r.target_id == targets["bitmap"].target_id
        )
        assert bitmap_plan.settings.get("enable_indexscan") == "off"


def test_same_parameters_on_every_side_and_the_first_side_rotates(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    store, run_id = run(tmp_path, fresh_db(pg15))
    with store:
        targets = store.targets([run_id])
        rows = [r for r in store.observations([t.target_id for t in targets])]
        by_sample: dict[tuple[str, int], list] = defaultdict(list)  # type: ignore[type-arg]
        for row in rows:
            by_sample[(row.query_key, row.sample_index)].append(row)
        firsts = []
        for sample_rows in by_sample.values():
            assert len({r.params for r in sample_rows}) == 1
            firsts.append(min(sample_rows, key=lambda r: r.collected_at).target_id)
        assert len(set(firsts)) == 2, "each side goes first for some samples"


def test_writes_under_explain_analyze_are_rolled_back(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    conninfo = fresh_db(pg15)
    run(tmp_path, conninfo)
    with psycopg.connect(conninfo) as conn:
        row = conn.execute("SELECT v FROM t WHERE id = 7").fetchone()
    assert row == (7,)


def test_a_failing_query_is_recorded_and_the_run_completes(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    text = WORKLOAD.replace("SET v = -1", "SET nosuchcolumn = -1")
    store, run_id = run(tmp_path, fresh_db(pg15), text)
    with store:
        assert [r.status for r in store.runs()] == ["complete"]
        targets = {t.target_id: t.name for t in store.targets([run_id])}
        failures = store.query_failures(list(targets))
        # it never worked: each side stops after GIVE_UP_AFTER executions (warm-up, then the
        # priming and measured executions of samples 0, 1 ...); the other side goes on
        tried = [("warmup", -1), ("priming", 0), ("measurement", 0), ("priming", 1)]
        tried += [("measurement", 1)]
        for name in ("index", "bitmap"):
            mine = [(f.phase, f.sample_index) for f in failures if targets[f.target_id] == name]
            assert mine == tried[:GIVE_UP_AFTER]
        assert {f.sqlstate for f in failures} == {"42703"}
        assert {f.message for f in failures} == {
            'column "nosuchcolumn" of relation "t" does not exist'
        }
        names = {k: q.name for k, q in store.queries().items()}
        measured = {names[r.query_key] for r in store.observations(list(targets))}
        assert measured == {"range"}


def test_failing_setup_is_reported_with_the_statement(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    text = WORKLOAD.replace("VACUUM ANALYZE t;", "VACUUM ANALYZE no_such_table;")
    with pytest.raises(PlanshiftError, match="setup statement 4 failed on local") as info:
        run(tmp_path, fresh_db(pg15), text)
    assert info.value.hint is not None and "no_such_table" in info.value.hint


def test_passwords_never_reach_the_store(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    conninfo = make_conninfo(fresh_db(pg15), password="hunter2-secret")
    store, run_id = run(tmp_path, conninfo)
    with store:
        info = store.targets([run_id])[0].info
        assert "***" in info["dsn"] and "hunter2" not in info["dsn"]
    assert b"hunter2-secret" not in (tmp_path / "store.duckdb").read_bytes()
    assert "hunter2" not in redact_conninfo("postgresql://u:hunter2@host/db")


@pytest.mark.parametrize(("prime", "cache"), [(True, "warm"), (False, "warm"), (True, "cold")])
def test_plan_count_matches_the_executions_run(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb, prime: bool, cache: str
) -> None:
    text = WORKLOAD.replace("warmup = 1", f"warmup = 1\nprime = {str(prime).lower()}")
    path = tmp_path / "w.toml"
    path.write_text(text)
    workload = load_workload(path)
    conninfo = fresh_db(pg15)
    executed: list[str] = []
    with (
        Store(tmp_path / "s.duckdb") as store,
        open_servers(
            resolve_target_specs(workload.targets, [], {"local": conninfo}),
            dsns={"local": conninfo},
        ) as servers,
    ):
        run_workload(
            workload,
            servers,
            store,
            RunOptions(setup_on_dsn=True, cache=cache),
            lambda label, n: executed.extend([label] * n),  # 0 steps: a note, no execution
        )
        stored = len(store.observations([t.target_id for t in store.targets()]))
    assert len(executed) == plan_count(workload, 2, RunOptions(cache=cache))
    # 2 queries x 2 sides x (1 warm-up + 4 measured, each primed once when prime = true;
    # a cold trial is never primed)
    primed = prime and cache == "warm"
    assert len(executed) == 2 * 2 * (1 + 4 * (2 if primed else 1))
    assert stored == 2 * 2 * 4, "priming and warm-up executions are not stored"


def test_each_query_point_and_target_keeps_its_own_explain(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    from detector.engine.comparison.compare import compare_sides, resolve_side
    from detector.engine.comparison.options import CompareOptions

    text = (
        WORKLOAD.split("[[queries]]")[0]
        + """
[[queries]]
name = "swept"
sql = "SELECT v FROM t WHERE id BETWEEN 100 AND 100 + %(n)s - 1"
sweep = { param = "n", values = [5, 50] }
"""
    )
    store, run_id = run(tmp_path, fresh_db(pg15), text)
    with store:
        base, cand = resolve_side(store, "index", run_id), resolve_side(store, "bitmap", run_id)
        examples = store.plan_examples([base.target_id, cand.target_id])
        assert len(examples) == 4  # 2 targets x 2 points, one shape each
        result = compare_sides(store, base, cand, CompareOptions(noise_run=None))
    rows = {q.point: q.baseline.dominant.plan.root.actual_rows_total for q in result.queries}
    assert rows == {"n=5": 5, "n=50": 50}, "per-node numbers come from this point's own EXPLAIN"


def test_rotation_gives_every_variant_the_first_turn_on_its_server() -> None:
    from collections import Counter

    from collectors.servers.targets import Server
    from collectors.sides import LiveSide, rotated

    servers = [Server("pg15", "", "embedded"), Server("pg18", "", "embedded")]
    sides = [
        LiveSide(server, variant, {}, connection=None)  # type: ignore[arg-type]
        for server in servers
        for variant in ("wm1", "wm4", "wm16")
    ]
    first_on_server: Counter[tuple[str, str]] = Counter()
    first_overall: Counter[str] = Counter()
    for index in range(12):
        order = rotated(sides, index)
        assert sorted(id(s) for s in order) == sorted(id(s) for s in sides)
        seen: set[str] = set()
        for side in order:
            if side.server.name not in seen:
                seen.add(side.server.name)
                first_on_server[(side.server.name, side.variant)] += 1
        first_overall[order[0].server.name] += 1
    assert set(first_on_server.values()) == {4}, first_on_server  # 12 samples / 3 variants
    assert first_overall == {"pg15": 6, "pg18": 6}


def test_one_statement_raises_the_servers_error_and_leaves_nothing_behind(
    pg17: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    conninfo = fresh_db(pg17)
    with psycopg.connect(conninfo, autocommit=True) as setup:
        setup.execute(
            "CREATE TABLE t AS SELECT i AS id, i % 100 AS v FROM generate_series(1, 1000) i"
        )
    server = Server(name="pg17", conninfo=conninfo, source="embedded")
    with connect(server) as conn, psycopg.connect(conninfo, autocommit=True) as other:
        small = {"work_mem": "64kB"}
        with pytest.raises(psycopg.errors.DivisionByZero):
            one_statement(conn, "DELETE FROM t WHERE 1 / (id - id) = 0", None, small)
        # settings refused are not the statement's error: the runner ends the run on them
        with pytest.raises(SettingsRefused, match="work_mem") as refused:
            one_statement(conn, "DELETE FROM t", None, {"work_mem": "-5"})
        assert refused.value.sqlstate == "22023"  # invalid_parameter_value
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert one_statement(conn, "SELECT current_setting('work_mem')", None, small)[0] == "64kB"
        assert one_statement(conn, "SELECT current_setting('work_mem')")[0] != "64kB"
        assert one_statement(conn, "SELECT %(v)s::int + 1", {"v": 41})[0] == "42"
        assert one_statement(conn, "SELECT 'x%'")[0] == "x%"
        assert one_statement(conn, "SELECT * FROM t WHERE v = 7", first_value=False)[0] == 10
        with pytest.raises(PlanshiftError, match="no row"):
            one_statement(conn, "SELECT 1 WHERE false")
        one_statement(conn, "SELECT pg_advisory_lock(42)")
        # a session-level advisory lock outlives ROLLBACK; the next execution releases it before
        # its statement runs (which sees no lock of the one before), as does reset_session
        held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s"
        pid = conn.info.backend_pid
        assert one_statement(conn, held % pid)[0] == "0"
        assert other.execute("SELECT pg_try_advisory_lock(42)").fetchone() == (True,)
        other.execute("SELECT pg_advisory_unlock(42)")
        one_statement(conn, "SELECT pg_advisory_lock(42)")
        assert other.execute(held, [pid]).fetchone() == (1,)
        reset_session(conn, "test")
        assert other.execute(held, [pid]).fetchone() == (0,)
        with pytest.raises(psycopg.errors.SyntaxError):
            one_statement(conn, "SELECT 1; DELETE FROM t")
        assert other.execute("SELECT count(*) FROM t").fetchone() == (1000,)


def test_control_statements_are_prepared_once_per_session(
    pg17: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    """BEGIN, the setter (with the advisory unlock) and ROLLBACK are named prepared statements:
    parsed once per session, gone after reset_session's DISCARD ALL, prepared again on the next
    execution; the workload statement itself is never prepared."""
    server = Server(name="pg17", conninfo=fresh_db(pg17), source="embedded")
    prepared = "SELECT name, statement FROM pg_prepared_statements ORDER BY name"
    with connect(server) as conn:
        for value in ("64kB", "128kB"):
            one_statement(conn, "SELECT current_setting('work_mem')", None, {"work_mem": value})
        names = [name for name, _ in conn.execute(prepared).fetchall()]
        assert names == ["planshift_begin", "planshift_rollback", "planshift_set1"]
        reset_session(conn, "test")
        assert conn.execute(prepared).fetchall() == []
        assert one_statement(conn, "SELECT 1")[0] == "1"
        statements = dict(conn.execute(prepared).fetchall())
        assert set(statements) == {"planshift_begin", "planshift_rollback", "planshift_set0"}
        assert "SELECT 1" not in statements.values()
