"""Benchmark of a fleet lake (not a test): 100 hosts' logs into both lake layouts, then reads.

    python bench/bench_fleet.py [--hosts 100] [--mb-per-host 20] [--simulate 1000]
                                [--processes 1,2] [--catalog ducklake:...]

Builds one day of stderr auto_explain log per host (--mb-per-host) from real entries captured
from PostgreSQL 15/17/18 (tests/fixtures/logs), plus the `incident` query of PostgreSQL 17
whose plan flips from a Bitmap Heap Scan to a Seq Scan at a known time on every fifth host.
Then: every host ingested from ONE process (`ingest DIR --source-from '{host}/...' --lake`)
into the Parquet lake, and the same stores exported to a DuckLake lake (a DuckDB-file catalog,
or --catalog; skipped with the reason on a DuckDB without the ducklake extension); per layout
the lake size and the times of a host's timeline of the flipping query (`timeline --lake
--source -q`) and of its fleet view (`fleet --lake -q`). --simulate N: each lake grown to N
hosts by copies of the hosts' rows under new names (real files and catalog entries), and the
same reads timed again. --processes: the older way too, one `ingest` process per host, that
many at once. The load average is printed beside each figure. Prints, never asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "logs"))

import duckdb  # noqa: E402
from capture_logs import _HEADER, PREFIX, plan_entries  # noqa: E402

from detector.store.extensions import available  # noqa: E402

LOGS = ROOT / "tests" / "fixtures" / "logs"
MB = 1 << 20
DAY = datetime(2026, 3, 2, tzinfo=UTC)
FLIP_QUERY = "SELECT sum(amount) FROM orders WHERE customer"


def bodies() -> tuple[list[bytes], list[bytes], list[bytes]]:
    """Background entries, and the incident query's entries before and after its flip."""
    background = [
        _HEADER.sub(b"", e, count=1)
        for source in ("pg15", "pg17", "pg18")
        for e in plan_entries(LOGS / source / "pg.log")
    ]
    incident = [_HEADER.sub(b"", e, count=1) for e in plan_entries(LOGS / "incident" / "pg.log")]
    # generic plans on both sides: a flip, not a plan-cache switch (custom -> generic)
    generic = [e for e in incident if _generic(e)]
    before = [e for e in generic if b"Bitmap Heap Scan" in e]
    after = [e for e in generic if b"Seq Scan" in e and b"Bitmap" not in e]
    return background, before, after


def _generic(entry: bytes) -> bool:
    from detector.model import parse_plan

    document = json.loads(entry.split(b"plan:\n", 1)[1].replace(b"\n\t", b"\n"))
    return parse_plan(document).generic


def write_host_log(path: Path, host: int, size: int, parts: tuple[list[bytes], ...]) -> None:
    background, before, after = parts
    rng = random.Random(host)
    flip_at = DAY + timedelta(hours=14, minutes=host) if host % 5 == 0 else None
    entries = max(size // 1500, 100)
    step = timedelta(days=1) / entries
    written = 0
    with path.open("wb", buffering=1 << 20) as handle:
        for i in range(entries):
            moment = DAY + step * i
            flipped = flip_at is not None and moment >= flip_at
            # a quarter of the traffic is the incident query
            pool = (after if flipped else before) if i % 4 == 0 else background
            stamp = moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3].encode()
            pid = b"%d" % (10000 + rng.randrange(64))
            chunk = b"".join((stamp, b" UTC [", pid, b"] ", pool[i % len(pool)]))
            handle.write(chunk)
            written += len(chunk)
            if written >= size:
                break


def ingest_per_host(planshift: Path, log: Path, host: str, work: Path, lake: Path) -> None:
    subprocess.run(
        [str(planshift), "ingest", str(log), "--source", host, "--store",
         str(work / f"{host}.duckdb"), "--lake", str(lake), "--log-line-prefix", PREFIX,
         "--jobs", "1"],
        check=True, capture_output=True,
    )  # fmt: skip


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr}")
    return time.perf_counter() - started


def load() -> str:
    return f"load average {os.getloadavg()[0]:.2f}"


def reads(planshift: Path, lake: str, label: str) -> None:
    for what, argv in (
        ("a host's timeline of one query", [str(planshift), "timeline", "--lake", lake,
                                            "-q", FLIP_QUERY, "--source", "host005"]),
        ("the fleet view of one query", [str(planshift), "fleet", "--lake", lake, "-q", FLIP_QUERY]),
        ("the fleet view of one query, one hour", [str(planshift), "fleet", "--lake", lake,
                                                   "-q", FLIP_QUERY, "--since", "2026-03-02T14:00",
                                                   "--until", "2026-03-02T15:00"]),
    ):  # fmt: skip
        seconds = sorted(timed(argv) for _ in range(3))[1]
        print(f"  {label}: {what}: {seconds:.2f} s (median of 3), {load()}")


def size_of(path: Path) -> tuple[float, int]:
    files = [f for f in path.rglob("*") if f.is_file()]
    return sum(f.stat().st_size for f in files) / MB, len(files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--mb-per-host", type=float, default=20)
    parser.add_argument(
        "--simulate", type=int, default=1000, help="hosts of the simulated lake (0: none)"
    )
    parser.add_argument(
        "--processes", default="", help="also ingest one process per host, e.g. 1,2"
    )
    parser.add_argument("--catalog", default=None, help="a DuckLake lake (default: a DuckDB file)")
    args = parser.parse_args()
    planshift = Path(sys.executable).parent / "planshift"
    work = Path(tempfile.mkdtemp(prefix="planshift-fleet-"))
    try:
        parts = bodies()
        logs = []
        for host in range(args.hosts):
            path = work / "logs" / f"host{host:03d}" / "postgresql.log"
            path.parent.mkdir(parents=True)
            write_host_log(path, host, int(args.mb_per_host * MB), parts)
            logs.append(path)
        total_mb = sum(p.stat().st_size for p in logs) / MB
        print(f"{args.hosts} hosts, {total_mb:.0f} MB of auto_explain logs, {os.cpu_count()} cores, "
              f"DuckDB {duckdb.__version__}")  # fmt: skip
        lake = work / "lake"
        wall = timed([str(planshift), "ingest", str(work / "logs"), "--source-from", "{host}/postgresql.log",
                      "--lake", str(lake), "--store", str(work / "stores"), "--log-line-prefix", PREFIX])  # fmt: skip
        print(
            f"ingest of {args.hosts} hosts from one process into the Parquet lake: {wall:.1f} s, "
            f"{total_mb / wall:.1f} MB/s, {load()}"
        )
        lakes = {"Parquet": str(lake)}
        if available("ducklake"):
            lakes["DuckLake"] = args.catalog or f"ducklake:{work / 'lake.ducklake'}"
            wall = timed([str(planshift), "ingest", str(work / "logs"), "--source-from", "{host}/postgresql.log",
                          "--lake", lakes["DuckLake"], "--store", str(work / "stores"),
                          "--log-line-prefix", PREFIX])  # fmt: skip
            print(
                f"the same {args.hosts} stores exported to DuckLake from one process: {wall:.1f} s, {load()}"
            )
        else:
            print(f"DuckLake: skipped (DuckDB {duckdb.__version__} has no ducklake extension here)")
        for label, where in lakes.items():
            directory = lake if label == "Parquet" else work / "lake.ducklake.files"
            mb, files = size_of(directory)
            print(f"{label} lake: {mb:.1f} MB in {files} files ({mb / total_mb:.1%} of the logs)")
            reads(planshift, where, f"{label}, {args.hosts} hosts")
        if args.simulate > args.hosts:
            simulate(lakes, lake, args.hosts, args.simulate)
            for label, where in lakes.items():
                directory = lake if label == "Parquet" else work / "lake.ducklake.files"
                mb, files = size_of(directory)
                print(f"{label} lake of {args.simulate} hosts: {mb:.0f} MB in {files} files")
                reads(planshift, where, f"{label}, {args.simulate} hosts")
        for processes in sorted({int(p) for p in args.processes.split(",") if p}):
            per_host = work / "per-host-lake"
            shutil.rmtree(per_host, ignore_errors=True)
            for store in work.glob("host*.duckdb"):
                store.unlink()
            started = time.perf_counter()
            with ThreadPoolExecutor(processes) as pool:
                jobs = [
                    pool.submit(ingest_per_host, planshift, log, log.parent.name, work, per_host)
                    for log in logs
                ]
                for job in jobs:
                    job.result()
            wall = time.perf_counter() - started
            print(
                f"ingest, one process per host, {processes} at once: "
                f"{total_mb / wall:.1f} MB/s ({wall:.1f} s), {load()}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def simulate(lakes: dict[str, str], parquet: Path, hosts: int, wanted: int) -> None:
    """Grow each lake to `wanted` hosts: host N's rows again as host N + k * hosts."""
    started = time.perf_counter()
    for table in parquet.iterdir():
        for copy in range(hosts, wanted):
            source = table / f"host=host{copy % hosts:03d}"
            if source.is_dir():
                shutil.copytree(source, table / f"host=host{copy:03d}")
    print(
        f"Parquet lake grown to {wanted} hosts (file copies): {time.perf_counter() - started:.1f} s, {load()}"
    )
    if "DuckLake" in lakes:
        started = time.perf_counter()
        grow_ducklake(lakes["DuckLake"], hosts, wanted)
        print(f"DuckLake lake grown to {wanted} hosts (INSERTs through the catalog): "
              f"{time.perf_counter() - started:.1f} s, {load()}")  # fmt: skip


def grow_ducklake(spec: str, hosts: int, wanted: int) -> None:
    from detector.store.ducklake_connect import attached, parse_spec

    with attached(parse_spec(spec), write=True) as con:
        tables = dict(con.execute(  # the host column: lake_host (max: beside a store's host), else host
            "SELECT table_name, max(column_name) FROM duckdb_columns() WHERE database_name = 'lake' "
            "AND column_name IN ('lake_host', 'host') GROUP BY ALL"
        ).fetchall())  # fmt: skip
        for batch in range(1, (wanted + hosts - 1) // hosts):
            con.execute("BEGIN")
            for table, column in tables.items():
                con.execute(
                    f'INSERT INTO lake."{table}" SELECT * REPLACE ('
                    f"'host' || lpad((CAST(substr({column}, 5) AS INTEGER) + {batch * hosts})::VARCHAR, 3, '0') "
                    f'AS {column}) FROM lake."{table}" WHERE CAST(substr({column}, 5) AS INTEGER) < {hosts}'
                )
            con.execute("COMMIT")


if __name__ == "__main__":
    main()
