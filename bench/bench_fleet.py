"""Benchmark of a fleet lake (not a test): many hosts ingest at once, then fleet queries.

    python bench/bench_fleet.py [--hosts 100] [--mb-per-host 20] [--processes 1,2]

Builds one day of stderr auto_explain log per host (--mb-per-host) from real entries captured
from PostgreSQL 15/17/18 (tests/fixtures/logs), plus the `incident` query of PostgreSQL 17
whose plan flips from a Bitmap Heap Scan to a Seq Scan at a known time on every fifth host.
Then, for each process count: ingest every host with `planshift ingest --source HOST --lake`
(one host per process, that many at once) and print MB/s; then the lake size, and the times of
a fleet timeline of the flipping query (`timeline --lake -q ...`) and of `fleet --lake`, with
the load average beside the figures. Prints, never asserts.
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

from capture_logs import _HEADER, PREFIX, plan_entries  # noqa: E402

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


def ingest(planshift: Path, log: Path, host: str, work: Path, lake: Path) -> None:
    subprocess.run(
        [str(planshift), "ingest", str(log), "--source", host, "--store",
         str(work / f"{host}.duckdb"), "--lake", str(lake), "--log-line-prefix", PREFIX,
         "--jobs", "1"],
        check=True, capture_output=True,
    )  # fmt: skip


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--mb-per-host", type=float, default=20)
    parser.add_argument("--processes", default=f"1,{os.cpu_count() or 1}")
    args = parser.parse_args()
    planshift = Path(sys.executable).parent / "planshift"
    work = Path(tempfile.mkdtemp(prefix="planshift-fleet-"))
    try:
        parts = bodies()
        logs = []
        for host in range(args.hosts):
            path = work / f"host{host:03d}.log"
            write_host_log(path, host, int(args.mb_per_host * MB), parts)
            logs.append(path)
        total_mb = sum(p.stat().st_size for p in logs) / MB
        print(f"{args.hosts} hosts, {total_mb:.0f} MB of auto_explain logs, {os.cpu_count()} cores")
        lake = work / "lake"
        for processes in sorted({int(p) for p in args.processes.split(",")}):
            shutil.rmtree(lake, ignore_errors=True)
            for store in work.glob("host*.duckdb"):
                store.unlink()
            started = time.perf_counter()
            with ThreadPoolExecutor(processes) as pool:
                jobs = [
                    pool.submit(ingest, planshift, log, f"host{i:03d}", work, lake)
                    for i, log in enumerate(logs)
                ]
                for job in jobs:
                    job.result()
            wall = time.perf_counter() - started
            print(
                f"ingest into the lake, {processes} process(es) at once: {total_mb / wall:.1f} MB/s "
                f"({wall:.1f} s), load average {os.getloadavg()[0]:.2f}"
            )
        size = sum(f.stat().st_size for f in lake.rglob("*.parquet")) / MB
        print(f"lake: {size:.1f} MB of Parquet ({size / total_mb:.1%} of the logs)")
        for label, argv in (
            ("fleet timeline of one query", [str(planshift), "timeline", "--lake", str(lake),
                                             "-q", FLIP_QUERY, "--source", "host005"]),
            ("fleet view (which hosts flipped)", [str(planshift), "fleet", "--lake", str(lake),
                                                  "-q", FLIP_QUERY]),
        ):  # fmt: skip
            seconds = sorted(timed(argv) for _ in range(3))[1]
            print(f"{label}: {seconds:.2f} s (median of 3), load average {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
