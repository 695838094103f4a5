"""Both lake layouts (hive Parquet, DuckLake) answer alike, and the fleet view's one SQL pass
gives each host's own timeline flips.

The DuckLake tests need DuckDB's ducklake extension: `make test` runs this module a second time
in .venv-oldest (DuckDB 1.5.5 with the PyPI extension wheels); on a DuckDB without it they skip.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from detector.engine.timeline.build import build_timeline
from detector.jobs.lake import fleet_report
from detector.store import Store
from detector.store.extensions import available
from detector.store.lakes import open_lake

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "logs"))
from capture_logs import _HEADER, PREFIX, plan_entries

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "fixtures" / "logs"
START = datetime(2026, 1, 1, 20, 0, tzinfo=UTC)
needs_ducklake = pytest.mark.skipif(
    not available("ducklake"),
    reason=f"DuckDB {duckdb.__version__} has no ducklake extension here (make test runs this "
    "module again in .venv-oldest: DuckDB 1.5.5 with the extension wheels)",
)
ROWS = (
    "SELECT t.name, q.sql, o.fingerprint, o.duration_ms, o.collected_at, e.pid, e.line "
    "FROM observations o JOIN targets t USING (target_id) JOIN queries q USING (query_key) "
    "JOIN log_entries e USING (observation_id)"
)


def planshift(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "detector", *map(str, args)],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip


def two_day_log(path: Path, seed: int, entries: int = 1500) -> None:
    """Real auto_explain entries (PostgreSQL 15, 17, prepared statements) drawn at random, 20 s
    apart from 20:00 over midnight: queries whose plans alternate (many segments: buckets)."""
    rng = random.Random(seed)
    bodies = [
        _HEADER.sub(b"", e, count=1)
        for source in ("pg15", "pg17", "prepared")
        for e in plan_entries(LOGS / source / "pg.log")
    ]
    with path.open("wb") as handle:
        for i in range(entries):
            stamp = (START + timedelta(seconds=20 * i)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
            pid = b"%d" % (20000 + rng.randrange(8))
            handle.write(stamp.encode() + b" UTC [" + pid + b"] " + rng.choice(bodies))


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("logs")
    made = {"h1": LOGS / "incident" / "pg.log", "h2": LOGS / "prepared" / "pg.log"}
    for host, seed in (("h3", 3), ("h4", 4)):
        made[host] = directory / host / "postgresql-2026-01-01.log"
        made[host].parent.mkdir()
        two_day_log(made[host], seed)
    return made


@pytest.fixture(scope="module")
def stores(logs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("stores")
    made = {}
    for host, log in logs.items():
        made[host] = directory / f"{host}.duckdb"
        done = planshift(
            "ingest", log, "--source", host, "--store", made[host], "--log-line-prefix", PREFIX
        )
        assert done.returncode == 0, done.stderr
    return made


def timeline_flips(
    stores: dict[str, Path], since: datetime | None = None, until: datetime | None = None
) -> tuple[set[tuple[object, ...]], dict[str, int]]:
    """Each host's flips and hosts per query, from its own store's timelines."""
    flips, seen = set(), {}
    for host, path in stores.items():
        with Store(path, read_only=True) as store:
            for timeline in build_timeline(store, since=since, until=until, per_source=True):
                seen[timeline.query_key] = seen.get(timeline.query_key, 0) + 1
                for before, after in timeline.flips:
                    flips.add((timeline.query_key, host, after.start, before.signature,
                               after.signature, before.median_ms, after.median_ms))  # fmt: skip
    return flips, seen


def fleet_flips(
    lake: str, since: str | None = None, until: str | None = None
) -> tuple[set[tuple[object, ...]], dict[str, int]]:
    queries, _ = fleet_report(
        store=Path("unused"), lake=lake, hosts=[], query=None, since=since, until=until
    )
    flips = {
        (q.query_key, f.host, f.at, f.before_signature, f.after_signature, f.before_median_ms, f.after_median_ms)
        for q in queries for f in q.flips
    }  # fmt: skip
    return flips, {q.query_key: q.hosts_seen for q in queries}


def export_all(lake: str, stores: dict[str, Path], data: str | None = None) -> None:
    opened = open_lake(lake, data=data)
    for host, path in stores.items():
        opened.export_host(path, host)


def test_the_fleet_pass_gives_each_hosts_own_timeline_flips(
    stores: dict[str, Path], tmp_path: Path
) -> None:
    lake = str(tmp_path / "lake")
    export_all(lake, stores)
    expected, seen = timeline_flips(stores)
    with Store(stores["h3"], read_only=True) as store:  # the mixed logs exercise bucketed timelines
        assert any(t.bucketed and t.flips for t in build_timeline(store, per_source=True))
    with Store(stores["h2"], read_only=True) as store:  # and prepared statements' generic plans
        assert any(t.switches for t in build_timeline(store, per_source=True))
    flips, hosts_seen = fleet_flips(lake)
    assert flips == expected and len({f[1] for f in flips}) >= 3
    assert all(hosts_seen[key] == seen[key] for key in hosts_seen)
    window = (START + timedelta(hours=3), START + timedelta(hours=6))
    expected, _ = timeline_flips(stores, *window)
    flips, _ = fleet_flips(lake, window[0].isoformat(), window[1].isoformat())
    assert flips == expected and flips
    # a store with several log sources: the same pass over its own tables
    both = tmp_path / "both.duckdb"
    assert open_lake(lake).materialize(both, hosts=["h3", "h4"]) == ["h3", "h4"]
    queries, hosts = fleet_report(
        store=both, lake=None, hosts=[], query=None, since=None, until=None
    )
    assert hosts == ["h3", "h4"]
    assert {(q.query_key, f.host, f.at) for q in queries for f in q.flips} == {
        f[:3] for f in timeline_flips({h: stores[h] for h in ("h3", "h4")})[0]
    }


def test_one_process_ingests_many_hosts_by_path_pattern(
    logs: dict[str, Path], stores: dict[str, Path], tmp_path: Path
) -> None:
    collected = tmp_path / "collected"
    for host in ("h3", "h4"):
        (collected / host).mkdir(parents=True)
        (collected / host / "postgresql-2026-01-01.log").write_bytes(logs[host].read_bytes())
    (collected / "README").write_text("not a log")
    lake = tmp_path / "lake"
    done = planshift(
        "ingest", collected, "--source-from", "{host}/postgresql-*.log", "--lake", lake,
        "--store", tmp_path / "stores", "--log-line-prefix", PREFIX,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "host h3: " in done.stdout and "2 hosts: " in done.stdout
    assert open_lake(str(lake)).hosts() == ["h3", "h4"]
    for host in ("h3", "h4"):
        with (
            Store(tmp_path / "stores" / f"{host}.duckdb", read_only=True) as mine,
            Store(stores[host], read_only=True) as alone,
        ):
            assert set(mine._con.execute(ROWS).fetchall()) == set(
                alone._con.execute(ROWS).fetchall()
            )
    unmatched = planshift(
        "ingest", logs["h1"], "--source-from", "{host}/postgresql-*.log", "--lake", lake
    )
    assert unmatched.returncode == 2 and "cannot be read with --source-from" in " ".join(
        unmatched.stderr.split()
    )


def test_log_entries_are_partitioned_by_day_and_sorted_by_query(
    stores: dict[str, Path], tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    export_all(str(lake), {"h3": stores["h3"]})
    days = sorted(p.name for p in (lake / "log_entries" / "host=h3").iterdir() if p.is_dir())
    assert days == ["day=2026-01-01", "day=2026-01-02"]
    con = duckdb.connect()
    keys = [row[0] for row in con.execute(
        f"SELECT query_key FROM read_parquet('{lake}/observations/host=h3/day=2026-01-01/data.parquet')"
    ).fetchall()]  # fmt: skip
    assert keys == sorted(keys) and len(set(keys)) > 1


@needs_ducklake
def test_both_layouts_give_the_same_answers(stores: dict[str, Path], tmp_path: Path) -> None:
    parquet, ducklake = str(tmp_path / "lake"), f"ducklake:{tmp_path / 'lake.ducklake'}"
    export_all(parquet, stores)
    export_all(ducklake, stores)
    assert open_lake(ducklake).hosts() == open_lake(parquet).hosts() == ["h1", "h2", "h3", "h4"]
    for args in (
        ("fleet", "--format", "json"),
        ("fleet", "-q", "orders", "--format", "json"),
        ("fleet", "--since", "2026-01-02T00:00", "--format", "json"),
        ("timeline", "--source", "h3", "--format", "json"),
        ("timeline", "--source", "h1", "-q", "orders", "--format", "json"),
    ):
        on_parquet, on_ducklake = (
            planshift(*args, "--lake", parquet),
            planshift(*args, "--lake", ducklake),
        )
        assert on_parquet.returncode == on_ducklake.returncode == 0, (
            on_parquet.stderr + on_ducklake.stderr
        )
        assert json.loads(on_parquet.stdout) == json.loads(on_ducklake.stdout), args
    for name, lake in (("p", parquet), ("d", ducklake)):
        open_lake(lake).materialize(
            tmp_path / f"{name}.duckdb", since=START.date() + timedelta(days=1)
        )
    with (
        Store(tmp_path / "p.duckdb", read_only=True) as p,
        Store(tmp_path / "d.duckdb", read_only=True) as d,
    ):
        assert set(p._con.execute(ROWS).fetchall()) == set(d._con.execute(ROWS).fetchall())
        assert p._con.execute("SELECT min(collected_at)::DATE FROM observations").fetchone() == (
            START.date() + timedelta(days=1),
        )


@needs_ducklake
def test_days_outside_the_window_are_never_read_from_ducklake(
    stores: dict[str, Path], tmp_path: Path
) -> None:
    ducklake = f"ducklake:{tmp_path / 'lake.ducklake'}"
    export_all(ducklake, {"h3": stores["h3"]})
    first_day = list((tmp_path / "lake.ducklake.files").rglob("lake_day=2026-01-01/*.parquet"))
    assert {p.parent.parent.parent.name for p in first_day} >= {"observations", "log_entries"}
    for path in first_day:  # break the first day's files: only reads that avoid them succeed
        path.write_bytes(b"not parquet")
    later = planshift(
        "fleet", "--lake", ducklake, "--since", "2026-01-02T00:00", "--format", "json"
    )
    assert later.returncode == 0, later.stderr
    expected, _ = timeline_flips({"h3": stores["h3"]}, datetime(2026, 1, 2, tzinfo=UTC))
    assert fleet_flips(ducklake, "2026-01-02T00:00")[0] == expected and expected
    timeline = planshift(
        "timeline", "--lake", ducklake, "--source", "h3", "--since", "2026-01-02T00:00"
    )
    assert timeline.returncode == 0, timeline.stderr
    everything = planshift("fleet", "--lake", ducklake)
    assert everything.returncode != 0  # the whole lake does read them


@needs_ducklake
def test_concurrent_writers_on_a_postgres_catalog_and_its_snapshots(
    pg17: object, fresh_db: object, logs: dict[str, Path], stores: dict[str, Path], tmp_path: Path
) -> None:
    conninfo = fresh_db(pg17)  # type: ignore[operator]
    lake = f"ducklake:postgres:{conninfo}"
    data = tmp_path / "data"
    writers = [
        subprocess.Popen(
            [sys.executable, "-m", "detector", "ingest", str(logs[host]), "--source", host,
             "--store", str(tmp_path / f"{host}.duckdb"), "--lake", lake, "--lake-data", str(data),
             "--log-line-prefix", PREFIX],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for host in stores
    ]  # fmt: skip
    outputs = [w.communicate(timeout=600) for w in writers]
    assert [w.returncode for w in writers] == [0] * len(stores), outputs
    assert all(f"observations in lake {lake}" in " ".join(out.split()) for out, _ in outputs)
    assert open_lake(lake).hosts() == sorted(stores)
    merged = tmp_path / "all.duckdb"
    open_lake(lake).materialize(merged)
    union: set[tuple[object, ...]] = set()
    for path in stores.values():
        with Store(path, read_only=True) as store:
            union |= set(store._con.execute(ROWS).fetchall())
    with Store(merged, read_only=True) as store:
        assert set(store._con.execute(ROWS).fetchall()) == union
    before = planshift("fleet", "--lake", lake, "--format", "json")
    snapshot = max(s for s, _, _ in open_lake(lake).snapshots())  # type: ignore[attr-defined]
    with Store(tmp_path / "h1.duckdb") as store:  # a later change: one more export
        store._con.execute("UPDATE queries SET name = 'renamed'")
    assert (
        planshift(
            "ingest",
            logs["h1"],
            "--source",
            "h1",
            "--store",
            tmp_path / "h1.duckdb",
            "--lake",
            lake,
        ).returncode
        == 0
    )
    now = planshift("fleet", "--lake", lake, "--format", "json")
    then = planshift("fleet", "--lake", lake, "--as-of", snapshot, "--format", "json")
    assert json.loads(then.stdout) == json.loads(before.stdout) != json.loads(now.stdout)
    assert "renamed" in now.stdout and "renamed" not in then.stdout


def test_a_password_on_the_command_line_is_refused_and_never_echoed(tmp_path: Path) -> None:
    done = planshift("fleet", "--lake", "ducklake:postgres:dbname=lake password=Sekr1t-x9")
    assert done.returncode == 2 and "PGPASSWORD" in done.stderr
    assert "Sekr1t-x9" not in done.stdout + done.stderr
    uri = planshift("fleet", "--lake", "ducklake:postgres:postgresql://me:Sekr1t-x9@db/lake")
    assert uri.returncode == 2 and "Sekr1t-x9" not in uri.stdout + uri.stderr


@pytest.mark.parametrize("layout", ["parquet", pytest.param("ducklake", marks=needs_ducklake)])
def test_a_lake_read_reaches_nothing_but_the_lake(
    layout: str, stores: dict[str, Path], tmp_path: Path
) -> None:
    lake = (
        str(tmp_path / "lake") if layout == "parquet" else f"ducklake:{tmp_path / 'lake.ducklake'}"
    )
    export_all(lake, {"h1": stores["h1"]})
    outside = tmp_path / "outside.csv"
    outside.write_text("a\n1\n")
    with open_lake(lake).reading() as con:
        for statement in (
            f"SELECT * FROM read_csv('{outside}')",
            "SELECT * FROM read_csv('/etc/passwd')",
            f"ATTACH '{tmp_path / 'other.duckdb'}' AS other",
            "SET enable_external_access = true",
            "LOAD httpfs",
        ):
            with pytest.raises(duckdb.Error):
                con.execute(statement)


@pytest.fixture
def s3_server(tmp_path: Path) -> object:
    """An S3-compatible server (moto's server mode) on loopback, with one bucket."""
    moto = pytest.importorskip("moto.server", reason="moto[server] is not installed")
    del moto
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        for _ in range(50):
            line = server.stdout.readline()
            if "Running on http" in line:
                break
        endpoint = line.split("Running on ", 1)[1].split()[0].rstrip("/")
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/planshift-lake", method="PUT"))
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=30)


@needs_ducklake
def test_object_storage_round_trip_with_credentials_from_the_environment(
    s3_server: str, logs: dict[str, Path], stores: dict[str, Path], tmp_path: Path
) -> None:
    import os

    secret = "planshift-S3-secret-" + "q7Zk2"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "AKIAPLANSHIFTTEST", "AWS_SECRET_ACCESS_KEY": secret,
           "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": s3_server}  # fmt: skip
    catalog = tmp_path / "lake.ducklake"
    lake = f"ducklake:{catalog}"
    outputs = []
    for host in ("h1", "h3"):
        done = planshift(
            "ingest", logs[host], "--source", host, "--store", tmp_path / f"{host}.duckdb",
            "--lake", lake, "--lake-data", "s3://planshift-lake/fleet/", "--log-line-prefix", PREFIX,
            env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout + done.stderr)
    import boto3

    bucket = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1",
                          aws_access_key_id="AKIAPLANSHIFTTEST", aws_secret_access_key=secret)  # fmt: skip
    keys = [o["Key"] for o in bucket.list_objects_v2(Bucket="planshift-lake")["Contents"]]
    assert any(
        k.startswith("fleet/main/observations/lake_host=h3/lake_day=2026-01-02/") for k in keys
    )
    parquet = tmp_path / "lake"
    export_all(str(parquet), {h: stores[h] for h in ("h1", "h3")})
    for args in (
        ("fleet", "--format", "json"),
        ("timeline", "--source", "h3", "-q", "sum", "--format", "json"),
    ):
        from_s3 = planshift(*args, "--lake", lake, env=env)
        assert from_s3.returncode == 0, from_s3.stderr
        assert json.loads(from_s3.stdout) == json.loads(planshift(*args, "--lake", parquet).stdout)
        outputs.append(from_s3.stdout + from_s3.stderr)
    no_keys = {k: v for k, v in env.items() if not k.startswith("AWS_")}
    refused = planshift("fleet", "--lake", lake, env=no_keys)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    outputs.append(refused.stdout + refused.stderr)
    assert not any(secret in text for text in outputs)  # never printed
    assert secret.encode() not in catalog.read_bytes()  # never stored in the catalog
    for key in keys:  # nor in the lake's data files
        assert (
            secret.encode()
            not in bucket.get_object(Bucket="planshift-lake", Key=key)["Body"].read()
        )


@needs_ducklake
def test_a_ducklake_host_name_belongs_to_the_store_that_first_exported_it(
    stores: dict[str, Path], tmp_path: Path
) -> None:
    from detector.errors import PlanshiftError

    lake = open_lake(f"ducklake:{tmp_path / 'lake.ducklake'}")
    lake.export_host(stores["h1"], "h1")
    before = lake.snapshots()  # type: ignore[attr-defined]
    with pytest.raises(PlanshiftError, match="host h1 in the lake belongs to another store"):
        lake.export_host(stores["h2"], "h1")
    assert lake.snapshots() == before  # nothing replaced  # type: ignore[attr-defined]
    assert lake.export_host(stores["h1"], "h1")["observations"] > 0  # its own store still exports


@pytest.mark.parametrize("layout", ["parquet", pytest.param("ducklake", marks=needs_ducklake)])
def test_custom_plans_flip_in_the_fleet_as_in_their_timeline(layout: str, tmp_path: Path) -> None:
    """prepared/reload.log: after a reload the custom plans take the shape the generic plan had
    all along (one fingerprint, the mode read per log entry): one flip, of the custom plans,
    from the lake and from a store, as the host's own timeline has it."""
    store = tmp_path / "shop.duckdb"
    done = planshift("ingest", LOGS / "prepared" / "reload.log", "--source", "shop", "--store", store,
                     "--log-line-prefix", PREFIX)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lake = (
        str(tmp_path / "lake") if layout == "parquet" else f"ducklake:{tmp_path / 'lake.ducklake'}"
    )
    export_all(lake, {"shop": store})
    expected, _ = timeline_flips({"shop": store})
    ((_, host, _, before, after, _, _),) = expected
    assert (host, before, after) == (
        "shop",
        "Aggregate > BitmapHeapScan(orders) > BitmapIndexScan(orders_customer)",
        "Aggregate > IndexScan(orders orders_customer)",
    )
    assert fleet_flips(lake)[0] == expected
    queries, _ = fleet_report(store=store, lake=None, hosts=[], query=None, since=None, until=None)
    assert {(q.query_key, f.host, f.at, f.before_signature, f.after_signature, f.before_median_ms,
             f.after_median_ms) for q in queries for f in q.flips} == expected  # fmt: skip
