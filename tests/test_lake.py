"""A fleet's lake: hosts export their stores at once; reading it equals reading each store."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import psycopg
import pytest

from detector.errors import PlanshiftError
from detector.store import Store
from detector.store.lake import check_host, export_host, lake_hosts, lake_queries, materialize

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "fixtures" / "logs"
HOSTS = {
    "h1": LOGS / "pg15" / "pg.log",
    "h2": LOGS / "incident" / "pg.log",
    "h3": LOGS / "events" / "pg.log",
}
# what identifies a stored execution whatever its ids: the union of the hosts' stores must equal the lake
ROWS = (
    "SELECT t.name, q.sql, o.fingerprint, o.duration_ms, o.collected_at, e.pid, e.line "
    "FROM observations o JOIN targets t USING (target_id) JOIN queries q USING (query_key) "
    "JOIN log_entries e USING (observation_id)"
)


def planshift(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "detector", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )


def rows(store_path: Path, where: str = "") -> set[tuple[object, ...]]:
    with Store(store_path, read_only=True) as store:
        return set(store._con.execute(ROWS + where).fetchall())


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("hosts")
    made = {}
    for host, log in HOSTS.items():
        made[host] = directory / f"{host}.duckdb"
        done = planshift("ingest", log, "--source", host, "--store", made[host])
        assert done.returncode == 0, done.stderr
    return made


def test_hosts_export_at_once_and_the_lake_is_the_union_of_their_stores(
    stores: dict[str, Path], tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    ingests = [  # three hosts ingest (again: idempotent) and export at the same time
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "detector",
                "ingest",
                str(HOSTS[host]),
                "--source",
                host,
                "--store",
                str(path),
                "--lake",
                str(lake),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for host, path in stores.items()
    ]
    outputs = [p.communicate(timeout=300) for p in ingests]
    assert [p.returncode for p in ingests] == [0, 0, 0], outputs
    assert all(" observations in lake " in out for out, _ in outputs)
    assert lake_hosts(lake) == ["h1", "h2", "h3"]
    merged = tmp_path / "all.duckdb"
    assert materialize(lake, merged) == ["h1", "h2", "h3"]
    assert rows(merged) == set().union(*(rows(path) for path in stores.values()))
    with Store(merged, read_only=True) as store:
        assert {t.name for t in store.targets()} == {"h1", "h2", "h3"}
        runs = store.runs()
    stored_runs = 0
    for path in stores.values():
        with Store(path, read_only=True) as store:
            stored_runs += len(store.runs())
    assert len({r.run_id for r in runs}) == stored_runs  # ids made unique per host

    again = export_host(stores["h2"], lake, "h2")  # re-exporting replaces, never duplicates
    assert again["observations"] == len(rows(stores["h2"]))
    twice = tmp_path / "again.duckdb"
    materialize(lake, twice)
    assert rows(twice) == rows(merged)


def test_a_host_filter_and_its_timeline_equal_that_host_alone(
    stores: dict[str, Path], tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    for host, path in stores.items():
        export_host(path, lake, host)
    only = tmp_path / "h2.duckdb"
    assert materialize(lake, only, hosts=["h2"]) == ["h2"]
    assert rows(only) == rows(stores["h2"])
    alone = planshift("timeline", "--store", stores["h2"], "--format", "json")
    from_lake = planshift("timeline", "--store", only, "--format", "json")
    assert alone.returncode == from_lake.returncode == 0, alone.stderr + from_lake.stderr
    assert json.loads(from_lake.stdout) == json.loads(alone.stdout)
    assert "FLIP" in planshift("timeline", "--store", only).stdout
    via_cli = planshift("timeline", "--lake", lake, "--source", "h2", "--format", "json")
    assert json.loads(via_cli.stdout) == json.loads(alone.stdout)
    fleet = json.loads(planshift("fleet", "--lake", lake, "--format", "json").stdout)
    flipped = {f["host"] for q in fleet["queries"] for f in q["flips"]}
    assert fleet["hosts"] == ["h1", "h2", "h3"] and "h2" in flipped
    assert all(
        f["after"]["signature"] != f["before"]["signature"]
        for q in fleet["queries"]
        for f in q["flips"]
    )
    only_h3 = json.loads(planshift("fleet", "--lake", lake, "--source", "h3", "-f", "json").stdout)
    assert {f["host"] for q in only_h3["queries"] for f in q["flips"]} == {"h3"}
    windows = planshift(
        "compare", "--lake", lake, "--host", "h2", "-b", "..03:34:47", "-c", "03:34:47..03:34:48.5",
        "--format", "json", "--fail-on", "never",
    )  # fmt: skip
    assert windows.returncode == 0, windows.stderr
    (compared,) = json.loads(windows.stdout)["queries"]
    assert compared["timing"]["verdict"] == "regressed" and compared["plan_changed"]
    assert planshift("compare", "--lake", lake, "-b", "..1", "-c", "1..").returncode == 2
    refused = planshift("fleet", "--lake", lake, "--source", "nosuch")
    assert refused.returncode == 2 and "hint: hosts in the lake: h1, h2, h3" in refused.stderr

    with pytest.raises(PlanshiftError, match="no host nosuch"):
        materialize(lake, tmp_path / "x.duckdb", hosts=["nosuch"])


def test_days_outside_the_window_are_not_read(stores: dict[str, Path], tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    export_host(stores["h1"], lake, "h1")
    days = sorted(p.name for p in (lake / "observations" / "host=h1").iterdir())
    assert days and all(d.startswith("day=") for d in days)
    first = days[0].removeprefix("day=")
    import datetime as dt

    after = dt.date.fromisoformat(first) + dt.timedelta(days=1)
    empty = tmp_path / "later.duckdb"
    materialize(lake, empty, since=after)
    with Store(stores["h1"], read_only=True) as store:
        runs = len(store.runs())
    with Store(empty, read_only=True) as store:
        assert store._con.execute("SELECT count(*) FROM observations").fetchone() == (0,)
        assert len(store.runs()) == runs  # what is not by day is still there


def test_host_names_are_directory_safe_and_views_are_never_exported(tmp_path: Path) -> None:
    for bad in ("../x", "a/b", "", ".hidden", "a b"):
        with pytest.raises(PlanshiftError):
            check_host(bad)
    assert check_host("db-1.eu_west") == "db-1.eu_west"
    with pytest.raises(PlanshiftError, match="not a planshift lake"):
        lake_hosts(tmp_path)
    hostile = tmp_path / "hostile.duckdb"
    Store(hostile).close()
    con = duckdb.connect(str(hostile))
    con.execute("DROP TABLE queries")
    con.execute(
        "CREATE VIEW queries AS SELECT 'k' AS query_key, 'n' AS name, 's' AS sql, 1 AS queryid"
    )
    con.close()
    with pytest.raises(PlanshiftError):
        export_host(hostile, tmp_path / "lake", "h1")
    assert not (tmp_path / "lake" / "queries").exists()


def test_a_query_filter_loads_that_query_alone_with_its_log_entries(
    stores: dict[str, Path], tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    for host, path in stores.items():
        export_host(path, lake, host)
    queries = lake_queries(lake)
    (key,) = [k for k, q in queries.items() if "FROM orders" in q.sql]
    only = tmp_path / "orders.duckdb"
    materialize(lake, only, query_keys={key})
    expected = rows(stores["h2"], f" WHERE o.query_key = '{key}'")
    assert rows(only) == expected and expected
    with Store(only, read_only=True) as store:
        counts = store._con.execute(
            "SELECT (SELECT count(*) FROM observations), (SELECT count(*) FROM log_entries)"
        ).fetchone()
    assert counts == (len(expected), len(expected))


def test_re_exporting_rewrites_only_what_changed(stores: dict[str, Path], tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    copy = tmp_path / "h3.duckdb"
    shutil.copyfile(stores["h3"], copy)
    export_host(copy, lake, "h3")
    files = sorted(lake.rglob("host=h3/**/data.parquet")) + sorted(
        lake.glob("*/host=h3/data.parquet")
    )
    before = {path: path.stat().st_mtime_ns for path in files}
    assert before
    export_host(copy, lake, "h3")
    assert {path: path.stat().st_mtime_ns for path in files} == before
    with Store(copy) as store:  # a changed row: only its table's file is rewritten
        store._con.execute("UPDATE runs SET label = label || ' (renamed)'")
    export_host(copy, lake, "h3")
    changed = {path for path in files if path.stat().st_mtime_ns != before[path]}
    assert changed == {lake / "runs" / "host=h3" / "data.parquet"}


def test_snapshots_reach_the_lake_under_the_host_name(
    pg17: object, fresh_db: Callable[[object], str], tmp_path: Path
) -> None:
    dsn = fresh_db(pg17)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
    store, lake = tmp_path / "db9.duckdb", tmp_path / "lake"
    unnamed = planshift("snapshot", "--target", dsn, "--store", store, "--lake", lake)
    assert unnamed.returncode == 2 and "--lake needs --name" in unnamed.stderr
    for _ in range(2):
        done = planshift(
            "snapshot", "--target", dsn, "--name", "db9", "--store", store, "--lake", lake
        )
        assert done.returncode == 0, done.stderr
    assert lake_hosts(lake) == ["db9"]
    merged = tmp_path / "all.duckdb"
    materialize(lake, merged)
    with Store(merged, read_only=True) as read, Store(store, read_only=True) as own:
        count = "SELECT count(*) FROM pgss_snapshots"
        assert read._con.execute(count).fetchone() == own._con.execute(count).fetchone() != (0,)
