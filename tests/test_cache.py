"""Cold-cache trials on real PostgreSQL: a cold execution reads its pages, a warm one does not,
the server stays healthy, and what a version cannot evict is said."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from helpers import FreshDb, run_and_compare

from collectors.runner import RunOptions, run_workload
from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.targets import open_servers, resolve_target_specs
from detector.jobs.workload import load_workload
from detector.store import Store

WORKLOAD = """
[workload]
name = "cache"
repetitions = 4
warmup = 1

[setup]
sql = '''
CREATE TABLE t (id int PRIMARY KEY, v int, pad text);
INSERT INTO t SELECT i, i % 100, repeat('x', 200) FROM generate_series(1, 20000) i;
VACUUM ANALYZE t;
'''

[[queries]]
name = "scan"
sql = "SELECT sum(v) FROM t WHERE id BETWEEN %(lo)s AND %(lo)s + 2000"
params = { lo = { range = [1, 17000] } }
"""


def run(tmp_path: Path, conninfo: str, cache: str) -> tuple[Store, int]:
    path = tmp_path / "w.toml"
    path.write_text(WORKLOAD)
    workload = load_workload(path)
    specs = resolve_target_specs(workload.targets, [], {"local": conninfo})
    store = Store(tmp_path / f"{cache}.duckdb")
    with open_servers(specs, dsns={"local": conninfo}) as servers:
        run_id = run_workload(workload, servers, store, RunOptions(cache=cache, setup_on_dsn=True))
    return store, run_id


@pytest.mark.parametrize("major", [17, 18])
def test_a_cold_execution_reads_its_pages_and_a_warm_one_does_not(
    tmp_path: Path, fresh_db: FreshDb, major: int, request: pytest.FixtureRequest
) -> None:
    cluster: EmbeddedCluster = request.getfixturevalue(f"pg{major}")
    conninfo = fresh_db(cluster)
    with psycopg.connect(conninfo, autocommit=True) as conn:  # a --dsn server: the DBA installs it
        conn.execute("CREATE EXTENSION pg_buffercache")
    for cache in ("cold", "warm"):
        if cache == "warm":
            with psycopg.connect(conninfo, autocommit=True) as conn:
                conn.execute("DROP TABLE t")
        store, run_id = run(tmp_path, conninfo, cache)
        with store:
            (target,) = store.targets([run_id])
            rows = store.observations([target.target_id])
        assert len(rows) == 4
        if cache == "cold":
            assert target.info["cache"] == {
                "mode": "cold",
                "shared_buffers": "evicted",
                "os_page_cache": "not dropped",
                "limits": ["the OS page cache of a --dsn server is out of reach: not dropped"],
            }
            assert all(r.shared_read > 0 and r.io_read_ms > 0 for r in rows), rows
        else:
            assert target.info["cache"] == {"mode": "warm"}
            assert all(r.shared_read == 0 for r in rows), rows
    with psycopg.connect(conninfo) as conn:  # eviction left the server healthy
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (20000,)


def test_cold_on_an_embedded_cluster_also_drops_the_os_page_cache(
    tmp_path: Path, pg18: EmbeddedCluster
) -> None:
    """`pg18` skips (with how to get it) when PostgreSQL 18 is missing; the test starts its own."""
    path = tmp_path / "w.toml"
    path.write_text(
        WORKLOAD.replace("[setup]", '[[targets]]\nname = "pg18"\npostgres = "18"\n\n[setup]')
    )
    workload = load_workload(path)
    specs = resolve_target_specs(workload.targets, [], {})
    with open_servers(specs) as servers, Store(tmp_path / "s.duckdb") as store:
        run_id = run_workload(workload, servers, store, RunOptions(cache="cold"))
        (target,) = store.targets([run_id])
        rows = store.observations([target.target_id])
    assert target.info["cache"]["os_page_cache"] == "dropped"
    assert target.info["cache"]["limits"] == []
    assert all(r.shared_read > 0 and r.io_read_ms > 0 for r in rows)


def test_postgresql_15_says_it_cannot_evict_shared_buffers(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    store, run_id = run(tmp_path, fresh_db(pg15), "cold")
    with store:
        (target,) = store.targets([run_id])
    assert target.info["cache"]["shared_buffers"] == "not evicted"
    assert any("cannot evict shared buffers" in why for why in target.info["cache"]["limits"])


@pytest.mark.parametrize(("checksums", "expected"), [(True, "on"), (None, "off")])
def test_checksums_are_a_per_target_choice_recorded_with_the_target(
    tmp_path: Path, checksums: bool | None, expected: str, pg15: EmbeddedCluster
) -> None:
    line = "" if checksums is None else f"checksums = {str(checksums).lower()}\n"
    path = tmp_path / "w.toml"
    path.write_text(
        WORKLOAD.replace("repetitions = 4", "repetitions = 1").replace(
            "[setup]", f'[[targets]]\nname = "pg15"\npostgres = "15"\n{line}\n[setup]'
        )
    )
    workload = load_workload(path)
    with (
        open_servers(resolve_target_specs(workload.targets, [], {})) as servers,
        Store(tmp_path / "s.duckdb") as store,
    ):
        run_id = run_workload(workload, servers, store, RunOptions())
        (target,) = store.targets([run_id])
    assert target.info["settings"]["data_checksums"] == expected
    assert ("--data-checksums" in target.info["initdb_options"]) == bool(checksums)


def test_cold_eic_comparison_on_18_names_effective_io_concurrency(
    tmp_path: Path, pg18: EmbeddedCluster
) -> None:
    """Seed 001 on PostgreSQL 18: the same sparse bitmap heap scan, effective_io_concurrency
    0 vs 64, cold cache: faster with prefetching, same plan and cost, and the finding says
    which setting did it."""
    from detector.engine.comparison.compare import compare_sides, resolve_side
    from detector.engine.comparison.options import CompareOptions

    example = (
        Path(__file__).resolve().parent.parent / "examples" / "io-concurrency" / "workload.toml"
    )
    path = tmp_path / "w.toml"
    path.write_text(example.read_text().replace("repetitions = 10", "repetitions = 20"))
    workload = load_workload(path)
    specs = resolve_target_specs(workload.targets, ["pg18"], {})
    with open_servers(specs) as servers, Store(tmp_path / "s.duckdb") as store:
        run_id = run_workload(workload, servers, store, RunOptions())
        result = compare_sides(
            store,
            resolve_side(store, "eic0", run_id),
            resolve_side(store, "eic64", run_id),
            CompareOptions(noise_run=None),
        )
    (query,) = result.queries
    assert not query.plan_changed
    assert query.timing.verdict.value == "improved", query.timing.describe()
    (finding,) = [f for f in result.findings if f.code == "PS201"]
    assert "same plan and cost" in finding.message
    assert "effective_io_concurrency 0 -> 64" in finding.message


def test_io_time_is_null_when_not_measured(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    """track_io_timing off: EXPLAIN shows no I/O time, and the store says unknown, not 0 ms;
    the ingest of a log captured without it does the same."""
    from rich.console import Console

    from collectors.logs.autoexplain import IngestOptions
    from detector.jobs.ingest import ingest_logs

    text = WORKLOAD.replace(
        "[setup]", '[variants.on]\n[variants.off]\ntrack_io_timing = "off"\n\n[setup]'
    )
    path = tmp_path / "w.toml"
    path.write_text(text)
    workload = load_workload(path)
    conninfo = fresh_db(pg15)
    with (
        open_servers(
            resolve_target_specs(workload.targets, [], {"local": conninfo}),
            dsns={"local": conninfo},
        ) as servers,
        Store(tmp_path / "s.duckdb") as store,
    ):
        run_id = run_workload(workload, servers, store, RunOptions(setup_on_dsn=True, cache="cold"))
        io = {
            t.name: {r.io_read_ms is None for r in store.observations([t.target_id])}
            for t in store.targets([run_id])
        }
    assert io == {"on": {False}, "off": {True}}
    log = Path(__file__).resolve().parent / "fixtures" / "logs" / "pg17" / "pg.log"
    ingest_logs(
        store_path=tmp_path / "log.duckdb",
        files=[log],
        source="db",
        options=IngestOptions(),
        console=Console(quiet=True),
    )
    with Store(tmp_path / "log.duckdb", read_only=True) as store:
        rows = store.observations([t.target_id for t in store.targets()])
    assert rows and all(r.io_read_ms is None for r in rows)


@pytest.mark.pg
def test_per_target_setup_compares_table_states_interleaved(tmp_path: Path) -> None:
    """Two clusters of one version, one with its table vacuumed after the load and one with
    10% of its rows updated since: the index-only scan reads the heap on the second only."""

    text = """
[workload]
name = "table-state"
repetitions = 5
warmup = 1

[[targets]]
name = "vacuumed"
postgres = "15"

[[targets]]
name = "churned"
postgres = "15"
setup = "UPDATE t SET v = v + 1 WHERE id % 10 = 0"

[setup]
sql = '''
CREATE TABLE t (id int PRIMARY KEY, v int) WITH (autovacuum_enabled = off);
INSERT INTO t SELECT i, i % 100 FROM generate_series(1, 100000) i;
VACUUM ANALYZE t;
'''

[variants.only]
enable_seqscan = "off"
enable_bitmapscan = "off"

[[queries]]
name = "ids"
sql = "SELECT count(id) FROM t WHERE id BETWEEN %(lo)s AND %(lo)s + 5000"
params = { lo = { range = [1, 90000] } }
"""
    result = run_and_compare(tmp_path, text, "vacuumed", "churned")
    (query,) = result.queries
    assert result.interleaved
    fetches = [
        {
            node.heap_fetches
            for _, node in side.dominant.plan.nodes()
            if node.heap_fetches is not None
        }
        for side in (query.baseline, query.candidate)
    ]
    assert fetches[0] == {0}
    assert min(fetches[1]) > 0
