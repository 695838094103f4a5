"""pg_stat_statements snapshots from real servers; deltas across resets and evictions."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from helpers import FreshDb
from rich.console import Console
from typer.testing import CliRunner

from collectors.pgss import read_as_json, read_from_json, read_pgss
from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.installations import find_installation
from detector.cli.app import app
from detector.engine.timeline.build import PgssDelta, store_pgss_deltas
from detector.errors import PlanshiftError
from detector.jobs.snapshot import store_snapshot, take_snapshot
from detector.store import Store

pytestmark = pytest.mark.pg
QUERY = "SELECT count(*) FROM pg_class WHERE relpages >= %s"
QUIET = Console(file=open("/dev/null", "w"))  # noqa: SIM115


def run(dsn: str, times: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i in range(times):
            conn.execute(QUERY, [i])


def with_pgss(dsn: str) -> str:
    """The database at `dsn`, after CREATE EXTENSION pg_stat_statements."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
    return dsn


def ours(deltas: list[PgssDelta]) -> list[PgssDelta]:
    return [d for d in deltas if d.query and "relpages >=" in d.query]


@pytest.mark.parametrize("major", [14, 16, 17])
def test_deltas_per_interval_and_after_a_reset(
    major: int, fresh_db: FreshDb, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The oldest major, and both sides of a rename: the view's columns differ (14: toplevel
    and pg_stat_statements_info; 17: shared_blk_read_time for 16's blk_read_time)."""
    dsn = with_pgss(fresh_db(request.getfixturevalue(f"pg{major}")))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
    store = tmp_path / "s.duckdb"
    take_snapshot(store_path=store, dsn=dsn, name="prod", console=QUIET)
    run(dsn, 3)
    take_snapshot(store_path=store, dsn=dsn, name="prod", console=QUIET)
    run(dsn, 2)
    take_snapshot(store_path=store, dsn=dsn, name="prod", console=QUIET)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
    run(dsn, 4)
    take_snapshot(store_path=store, dsn=dsn, name="prod", console=QUIET)
    with Store(store, read_only=True) as db:
        deltas = ours(store_pgss_deltas(db, "prod"))
    assert [(d.calls, d.note) for d in deltas] == [(3, "new"), (2, None), (4, "reset")]
    assert all(d.mean_ms is not None and d.mean_ms >= 0 for d in deltas)
    assert deltas[0].end == deltas[1].start and deltas[1].end < deltas[2].end
    with Store(store, read_only=True) as db:
        read_times = db._con.execute(
            "SELECT blk_read_time, toplevel FROM pgss_snapshots WHERE contains(query, 'relpages >=')"
        ).fetchall()
    # track_io_timing is on in embedded clusters: the renamed column is read on every version
    assert read_times and all(t is not None and top is True for t, top in read_times), read_times


def test_an_evicted_statement_counts_from_zero_again(tmp_path: Path) -> None:
    try:
        installation = find_installation(15)
    except PlanshiftError:
        pytest.skip("PostgreSQL 15 is not installed")
    settings = {"pg_stat_statements.max": "100"}
    with EmbeddedCluster(installation, settings=settings, name="pgss-evict") as cluster:
        dsn = with_pgss(cluster.conninfo)
        run(dsn, 5)
        store = tmp_path / "s.duckdb"
        take_snapshot(store_path=store, dsn=dsn, name="small", console=QUIET)
        with psycopg.connect(dsn, autocommit=True) as conn:
            for i in range(300):
                for _ in range(8):
                    conn.execute("SELECT " + ", ".join(["1"] * (i + 1)))  # 300 statements
        run(dsn, 2)
        take_snapshot(store_path=store, dsn=dsn, name="small", console=QUIET)
    with Store(store, read_only=True) as db:
        info = sorted(db.pgss_info().values(), key=lambda pair: pair[0] or 0)
        deltas = ours(store_pgss_deltas(db, "small"))
    assert info[0][0] is not None and info[-1][0] is not None and info[-1][0] > info[0][0]
    assert [(d.calls, d.note) for d in deltas] == [(2, "dealloc")]


def test_snapshot_cli_and_its_errors(
    pg17: EmbeddedCluster, fresh_db: FreshDb, tmp_path: Path
) -> None:
    dsn = fresh_db(pg17)
    store = tmp_path / "s.duckdb"
    runner = CliRunner()
    missing = runner.invoke(app, ["snapshot", "--target", dsn, "--store", str(store)])
    assert missing.exit_code == 2 and "CREATE EXTENSION" in missing.output
    with_pgss(dsn)
    result = runner.invoke(app, ["snapshot", "--target", dsn, "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert "statements" in result.output
    with Store(store, read_only=True) as db:
        (target,) = db.targets()
        assert target.source == "dsn" and target.server_version_num // 10000 == 17
        assert db.pgss_snapshots([target.target_id])
    bad = runner.invoke(
        app, ["snapshot", "--target", "host=/nonexistent dbname=x", "--store", str(store)]
    )
    assert bad.exit_code == 2 and "cannot connect" in bad.output


def test_a_read_stored_from_its_json_gives_the_same_deltas(
    pg17: EmbeddedCluster, fresh_db: FreshDb, tmp_path: Path
) -> None:
    """Snapshots kept as JSON (the README's fixture) store what a live snapshot stores."""
    dsn = with_pgss(fresh_db(pg17))
    reads = []
    for times in (0, 3, 2):
        run(dsn, times)
        with psycopg.connect(dsn, autocommit=True) as conn:
            reads.append(read_pgss(conn))
    documents = json.loads(json.dumps([read_as_json(read) for read in reads]))
    restored = [read_from_json(document) for document in documents]
    assert restored == reads
    for read in restored:
        store_snapshot(tmp_path / "s.duckdb", read, "prod", QUIET)
    with Store(tmp_path / "s.duckdb", read_only=True) as db:
        assert [d.calls for d in ours(store_pgss_deltas(db, "prod"))] == [3, 2]
