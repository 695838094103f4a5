"""The diverse real log of `bench_ingest_diverse.py`: captured from a real PostgreSQL 15 cluster.

`capture_log(cache, plan_format, mb)` starts an embedded cluster (as an unprivileged user when
run as root) with auto_explain on every statement (log_min_duration 0, log_analyze, buffers,
timing, verbose, nested statements; JSON or text plans), the logging collector writing a stderr
log with the README's `log_line_prefix`, and runs at the same time, until the log holds `mb` MB:

- three Python sessions drawing statements from `diverse_sql` (TPC-H-like tables, a partitioned
  table, pgbench's tables; literals inline or bound by the server; one session with parallel
  plans made cheap, so Gather / Partial Aggregate appear);
- `pgbench` from the installation: tpcb-like with prepared statements, and select-only with the
  simple protocol (literals in the text), rate-limited so they do not drown the rest;
- Debian's `sysbench` oltp_read_write on the pgsql driver with prepared statements, when installed.

The log is cached (`cache/diverse-<format>-<mb>mb.log`) and reused. `build_log(real, out, mb)`
makes a benchmark log of `mb` MB by concatenating copies of the real log, each copy's times
shifted after the previous copy's end and its pids offset (so sessions stay apart); the last
copy is cut at an entry boundary. Every copy holds the same thousands of distinct statements.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from diverse_sql import SCHEMA, statement  # noqa: E402

from collectors.servers.embedded import EmbeddedCluster  # noqa: E402
from collectors.servers.installations import find_installation  # noqa: E402

PREFIX = "%m [%p] %q%u@%d qid=%Q "  # the README's log_line_prefix
MB = 1 << 20
QUIET = "-c auto_explain.log_min_duration=-1"  # set-up is not logged
_HEADER = re.compile(rb"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(\.\d{3} \w+ \[)(\d+)\]", re.MULTILINE)


def settings(plan_format: str) -> dict[str, str]:
    return {
        "logging_collector": "on",
        "log_destination": "stderr",
        "log_directory": "log",
        "log_filename": "pg.log",
        "log_rotation_size": "0",
        "log_line_prefix": PREFIX,
        "auto_explain.log_min_duration": "0",
        "auto_explain.log_analyze": "on",
        "auto_explain.log_format": plan_format,
        "auto_explain.log_buffers": "on",
        "auto_explain.log_timing": "on",
        "auto_explain.log_verbose": "on",
        "auto_explain.log_nested_statements": "on",
        "max_parallel_workers_per_gather": "2",
        "max_connections": "40",
        "jit": "off",
    }


def capture_log(cache: Path, plan_format: str, mb: int) -> Path:
    out = cache / f"diverse-{plan_format}-{mb}mb.log"
    if out.exists():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    cluster = EmbeddedCluster(find_installation(15), settings=settings(plan_format), name="diverse")
    cluster.start()
    try:
        log = cluster.data_dir / "log" / "pg.log"
        _run_workload(cluster, log, mb * MB)
        time.sleep(0.5)
        shutil.copyfile(log, out.with_suffix(".tmp"))
        out.with_suffix(".tmp").rename(out)
    finally:
        cluster.stop()
    return out


def _run_workload(cluster: EmbeddedCluster, log: Path, target: int) -> None:
    host, port = str(cluster.socket_dir), str(cluster.port)
    env = {**os.environ, "PGOPTIONS": QUIET, "PGHOST": host, "PGPORT": port, "PGUSER": "postgres"}
    bindir = cluster.installation.bindir
    with psycopg.connect(cluster.conninfo, autocommit=True) as admin:
        for database in ("tpch", "sbtest"):
            admin.execute(f"CREATE DATABASE {database}")
    subprocess.run([bindir / "pgbench", "-i", "-q", "-s", "10", "tpch"], env=env, check=True,
                   capture_output=True)  # fmt: skip
    with psycopg.connect(cluster.conninfo.replace("dbname=postgres", "dbname=tpch"),
                         autocommit=True, options=QUIET) as conn:  # fmt: skip
        for command in SCHEMA:
            conn.execute(command)
    clients = _clients(bindir, env, host, port)
    stop = threading.Event()
    sessions = [threading.Thread(target=_session, args=(cluster, seed, stop)) for seed in range(3)]
    for session in sessions:
        session.start()
    try:
        while log.stat().st_size < target and all(s.is_alive() for s in sessions):
            time.sleep(0.5)
    finally:
        stop.set()
        for session in sessions:
            session.join()
        for client in clients:
            client.terminate()
            client.wait()


def _clients(
    bindir: Path, env: dict[str, str], host: str, port: str
) -> list[subprocess.Popen[bytes]]:
    logged = {**env, "PGOPTIONS": ""}
    pgbench = str(bindir / "pgbench")
    commands = [
        [pgbench, "-M", "prepared", "-c", "2", "-j", "1", "-R", "30", "-T", "3600", "tpch"],
        [pgbench, "-M", "simple", "-S", "-c", "1", "-R", "20", "-T", "3600", "tpch"],
    ]
    if shutil.which("sysbench"):
        common = ["--db-driver=pgsql", f"--pgsql-host={host}", f"--pgsql-port={port}",
                  "--pgsql-user=postgres", "--pgsql-db=sbtest", "--tables=4", "--table-size=20000"]  # fmt: skip
        subprocess.run(["sysbench", "oltp_read_write", *common, "prepare"], env=env, check=True,
                       capture_output=True)  # fmt: skip
        commands.append(["sysbench", "oltp_read_write", *common, "--threads=2", "--rate=4",
                         "--time=3600", "--db-ps-mode=auto", "--range_size=50", "run"])  # fmt: skip
    return [
        subprocess.Popen(command, env=logged, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for command in commands
    ]


def _session(cluster: EmbeddedCluster, seed: int, stop: threading.Event) -> None:
    rng = random.Random(seed)
    conninfo = cluster.conninfo.replace("dbname=postgres", "dbname=tpch")
    with psycopg.connect(conninfo, autocommit=True) as conn:
        if seed == 0:  # parallel plans in this session
            for name in (
                "parallel_setup_cost",
                "parallel_tuple_cost",
                "min_parallel_table_scan_size",
            ):
                conn.execute(f"SET {name} = 0")
        while not stop.is_set():
            text, params = statement(rng)
            with contextlib.suppress(psycopg.Error):
                conn.execute(text, params)


def build_log(real: Path, out: Path, mb: int) -> Path:
    """`mb` MB of copies of `real`, times shifted past the previous copy, pids offset."""
    if out.exists() and (mb - 1) * MB < out.stat().st_size <= mb * MB:  # cut at an entry
        return out
    data = real.read_bytes()
    first_stamp = _HEADER.search(data)
    last_stamp = _HEADER.search(data, data.rfind(b"\n20", 0, len(data) - 1) + 1)
    if first_stamp is None or last_stamp is None:
        raise ValueError(f"{real}: no line with a time in the log")
    first = datetime.strptime(first_stamp.group(1).decode(), "%Y-%m-%d %H:%M:%S")
    span = datetime.strptime(last_stamp.group(1).decode(), "%Y-%m-%d %H:%M:%S") - first
    target, written, copy = mb * MB, 0, 0
    with out.with_suffix(".tmp").open("wb") as handle:
        while written < target:
            shifted = _shift(data, (span + timedelta(seconds=1)) * copy, 1000 * copy)
            if written + len(shifted) > target:
                cut = shifted.rfind(b"\n20", 0, target - written)
                handle.write(shifted[: cut + 1])
                break
            handle.write(shifted)
            written += len(shifted)
            copy += 1
    out.with_suffix(".tmp").rename(out)
    return out


def _shift(data: bytes, delta: timedelta, pid_offset: int) -> bytes:
    if not delta:
        return data
    cache: dict[bytes, bytes] = {}

    def moved(match: re.Match[bytes]) -> bytes:
        stamp = match.group(1)
        new = cache.get(stamp)
        if new is None:
            when = datetime.strptime(stamp.decode(), "%Y-%m-%d %H:%M:%S") + delta
            new = cache[stamp] = when.strftime("%Y-%m-%d %H:%M:%S").encode()
        return b"%s%s%d]" % (new, match.group(2), int(match.group(3)) + pid_offset)

    return _HEADER.sub(moved, data)
