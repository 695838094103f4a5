"""Benchmark of `planshift capture --data` and of loading the capture into replay targets (not a
test). Figures are printed, never asserted.

    python bench/bench_capture.py [--mb 400] [--source 14] [--targets 14,17] [--loaders]

Builds on an embedded cluster of --source a database of at least --mb (pg_database_size):
TPC-H-like tables generated with SQL (generate_series: region, nation, supplier, customer,
orders, lineitem, with their indexes) and `pgbench -i` at the scale that fills the rest. Runs a
workload on it with pg_stat_statements and auto_explain on (TPC-H-like queries with extract,
date and interval constants, over several constants; pgbench select-only over the simple and
prepared protocols; a DBA's monitoring query) and production settings (work_mem at the
database level). Then, each a `planshift` command in its own process, timed, with the RSS of
its process tree (planshift and its pg_dump; the servers are not its children) sampled every
0.1 s:

- capture --data --log: the dump streamed to disk;
- run on --targets (three repetitions): the setup (loading the dump into every target, from its
  `set up ... in` line) and the whole run.

--loaders compares, in this process on fresh clusters of --targets, ways to load the same
database: the dump streamed into the targets at the same time (what a run does), one after
the other, pg_restore -j 2 of a custom-format dump into the targets at the same time, and a dump
of INSERT statements (what capture wrote before) streamed the same way. The load average is
printed beside every figure.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

from collectors.capture.dump import DUMP_OPTIONS  # noqa: E402
from collectors.server_setup import prepare_servers  # noqa: E402
from collectors.servers.embedded import EmbeddedCluster  # noqa: E402
from collectors.servers.installations import find_installation  # noqa: E402
from collectors.servers.targets import Server  # noqa: E402
from detector.jobs.workload import load_workload  # noqa: E402

MB = 1 << 20
SOURCE_SETTINGS = {
    "auto_explain.log_min_duration": "0",
    "auto_explain.log_format": "json",
    "log_line_prefix": "%m [%p] %q%u@%d ",
    "shared_buffers": "256MB",
    "max_wal_size": "4GB",
    "autovacuum": "off",
}
TPCH = """
CREATE TABLE region (r_regionkey int PRIMARY KEY, r_name text NOT NULL, r_comment text);
INSERT INTO region SELECT i, 'REGION' || i, md5(i::text) FROM generate_series(0, 4) i;
CREATE TABLE nation (n_nationkey int PRIMARY KEY, n_name text NOT NULL,
                     n_regionkey int NOT NULL REFERENCES region, n_comment text);
INSERT INTO nation SELECT i, 'NATION' || i, i % 5, md5(i::text) FROM generate_series(0, 24) i;
CREATE TABLE supplier (s_suppkey int PRIMARY KEY, s_name text NOT NULL,
                       s_nationkey int NOT NULL REFERENCES nation, s_acctbal numeric(12, 2),
                       s_comment text);
INSERT INTO supplier SELECT i, 'Supplier#' || i, i % 25, (i * 7919 % 1000000) / 100.0,
       md5(i::text) FROM generate_series(1, {suppliers}) i;
CREATE TABLE customer (c_custkey int PRIMARY KEY, c_name text NOT NULL,
                       c_nationkey int NOT NULL REFERENCES nation, c_mktsegment text NOT NULL,
                       c_acctbal numeric(12, 2), c_comment text);
INSERT INTO customer SELECT i, 'Customer#' || i, i % 25,
       (ARRAY['AUTOMOBILE', 'BUILDING', 'FURNITURE', 'HOUSEHOLD', 'MACHINERY'])[i % 5 + 1],
       (i * 7919 % 1100000) / 100.0 - 1000, md5(i::text) FROM generate_series(1, {customers}) i;
CREATE TABLE orders (o_orderkey int PRIMARY KEY, o_custkey int NOT NULL,
                     o_orderstatus char(1) NOT NULL, o_totalprice numeric(12, 2) NOT NULL,
                     o_orderdate date NOT NULL, o_orderpriority text NOT NULL, o_comment text);
INSERT INTO orders SELECT i, 1 + (i * 7919) % {customers}, (ARRAY['F', 'O', 'P'])[i % 3 + 1],
       (i * 104729 % 50000000) / 100.0, date '1992-01-01' + ((i * 31337) % 2400)::int,
       (i % 5 + 1) || '-PRIORITY', md5(i::text) || md5((i + 1)::text)
FROM generate_series(1::bigint, {orders}) i;
CREATE TABLE lineitem (l_orderkey int NOT NULL, l_linenumber int NOT NULL, l_partkey int NOT NULL,
                       l_suppkey int NOT NULL, l_quantity numeric(12, 2) NOT NULL,
                       l_extendedprice numeric(12, 2) NOT NULL, l_discount numeric(12, 2) NOT NULL,
                       l_tax numeric(12, 2) NOT NULL, l_returnflag char(1) NOT NULL,
                       l_linestatus char(1) NOT NULL, l_shipdate date NOT NULL,
                       l_commitdate date NOT NULL, l_receiptdate date NOT NULL,
                       l_shipmode text NOT NULL, l_comment text,
                       PRIMARY KEY (l_orderkey, l_linenumber));
INSERT INTO lineitem SELECT o, n, 1 + (o * 31 + n) % 200000, 1 + (o + n * 7) % {suppliers},
       1 + (o + n) % 50, ((o + n) % 50 + 1) * 901.5, ((o * n) % 11) / 100.0,
       ((o + n) % 9) / 100.0, (ARRAY['A', 'N', 'R'])[(o + n) % 3 + 1],
       (ARRAY['F', 'O'])[(o * n) % 2 + 1],
       date '1992-01-02' + ((o * 31337) % 2400 + n * 3)::int,
       date '1992-01-30' + ((o * 31337) % 2400)::int,
       date '1992-02-10' + ((o * 31337) % 2400 + n)::int,
       (ARRAY['AIR', 'MAIL', 'RAIL', 'SHIP', 'TRUCK', 'FOB', 'REG AIR'])[(o + n) % 7 + 1],
       md5((o * 8 + n)::text)
FROM generate_series(1::bigint, {orders}) o, generate_series(1, 4) n;
CREATE INDEX orders_date ON orders (o_orderdate);
CREATE INDEX orders_cust ON orders (o_custkey);
CREATE INDEX lineitem_ship ON lineitem (l_shipdate);
VACUUM ANALYZE;
"""
# TPC-H-shaped queries with the constants pg_stat_statements turns into $n where the grammar
# wants a literal; each run with several values
QUERIES = (
    "SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice * (1 - l_discount)), "
    "avg(l_discount), count(*) FROM lineitem WHERE l_shipdate <= date '1998-12-01' - interval "
    "'{days} days' GROUP BY 1, 2 ORDER BY 1, 2",
    "SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate "
    "FROM customer, orders, lineitem WHERE c_mktsegment = '{segment}' AND c_custkey = o_custkey "
    "AND l_orderkey = o_orderkey AND o_orderdate < date '1995-03-{day}' "
    "AND l_shipdate > date '1995-03-{day}' GROUP BY l_orderkey, o_orderdate "
    "ORDER BY revenue DESC, o_orderdate LIMIT 10",
    "SELECT sum(l_extendedprice * l_discount) FROM lineitem WHERE l_shipdate >= date "
    "'199{year}-01-01' AND l_shipdate < date '199{year}-01-01' + interval '1' year "
    "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
    "SELECT n_name, extract(year FROM o_orderdate) AS o_year, sum(o_totalprice) FROM orders "
    "JOIN customer ON c_custkey = o_custkey JOIN nation ON n_nationkey = c_nationkey "
    "WHERE o_orderdate BETWEEN date '1995-01-01' AND date '1996-12-31' GROUP BY 1, 2 ORDER BY 1, 2",
    "SELECT c_custkey, c_name, sum(o_totalprice) FROM customer JOIN orders ON o_custkey = c_custkey "
    "WHERE o_orderdate >= date '1993-{month}-01' AND o_orderdate < date '1993-{month}-01' "
    "+ interval '3' month GROUP BY c_custkey, c_name ORDER BY 3 DESC LIMIT 20",
)
VALUES = (
    {"days": 90, "segment": "BUILDING", "day": 15, "year": 4, "month": 10},
    {"days": 60, "segment": "MACHINERY", "day": 20, "year": 5, "month": "07"},
    {"days": 120, "segment": "AUTOMOBILE", "day": 10, "year": 6, "month": "04"},
)
MONITORING = "SELECT query, calls, total_exec_time FROM pg_stat_statements ORDER BY 3 DESC LIMIT 10"


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class TreeMemory:
    """Peak RSS of a process and its descendants, sampled every 0.1 s from /proc."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss(self.pid))
            time.sleep(0.1)


def tree_rss(root: int) -> int:
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            statm = (entry / "statm").read_text().split()
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
        rss[int(entry.name)] = int(statm[1]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total


def timed_command(argv: Sequence[str], env: dict[str, str]) -> tuple[float, int, str]:
    """(seconds, peak RSS of its process tree, output) of a command."""
    started = time.perf_counter()
    process = subprocess.Popen(
        list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    with TreeMemory(process.pid) as memory:
        output, _ = process.communicate()
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed ({process.returncode}):\n{output[-3000:]}")
    return seconds, memory.peak, output


def build_source(cluster: EmbeddedCluster, mb: int) -> str:
    with psycopg.connect(cluster.conninfo, autocommit=True) as conn:
        conn.execute("CREATE DATABASE shop")
        conn.execute("ALTER DATABASE shop SET work_mem = '16MB'")
    dsn = make_conninfo(cluster.conninfo, dbname="shop")
    orders = max(20_000, int(300_000 * (mb - 150) / 250))
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
        sql = TPCH.format(orders=orders, customers=orders // 10, suppliers=max(orders // 150, 10))
        for statement in filter(str.strip, sql.split(";")):
            conn.execute(statement)
        (size,) = conn.execute("SELECT pg_database_size(current_database())").fetchone() or (0,)
    scale = max(1, int((mb * MB - size) / (15 * MB)) + 1)
    pgbench(cluster, "-i", "-s", str(scale), "-q")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        (size,) = conn.execute("SELECT pg_database_size(current_database())").fetchone() or (0,)
    print(
        f"source: PostgreSQL {cluster.installation.version}, database shop {size / MB:,.0f} MB "
        f"(TPC-H-like, {orders:,} orders and {4 * orders:,} line items; pgbench scale {scale}), "
        f"built in {time.perf_counter() - started:.0f} s; load average {load_average()}"
    )
    return dsn


def pgbench(cluster: EmbeddedCluster, *arguments: str) -> None:
    env = {**os.environ, "PGHOST": str(cluster.socket_dir), "PGPORT": str(cluster.port)}
    env["PGUSER"] = "postgres"
    binary = cluster.installation.bindir / "pgbench"
    subprocess.run([str(binary), *arguments, "shop"], env=env, check=True, capture_output=True)


def run_workload(cluster: EmbeddedCluster, dsn: str) -> None:
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
        for values in VALUES:
            for sql in QUERIES:
                conn.execute(sql.format(**values))
        for _ in range(3):
            conn.execute(MONITORING)
    for protocol in ("simple", "prepared"):
        pgbench(cluster, "-M", protocol, "-S", "-T", "5")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT 'end of the load'")
    deadline = time.monotonic() + 60
    while "end of the load" not in cluster.log_path.read_text(errors="replace"):
        if time.monotonic() > deadline:
            raise SystemExit("the load's last entry never reached the server log")
        time.sleep(0.1)
    print(f"workload: {time.perf_counter() - started:.0f} s; load average {load_average()}")


def planshift(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "detector", *arguments]


def capture_and_replay(
    cluster: EmbeddedCluster, dsn: str, work: Path, targets: Sequence[str], env: dict[str, str]
) -> Path:
    out = work / "cap"
    seconds, peak, output = timed_command(
        planshift("capture", "--target", dsn, "--log", str(cluster.log_path), "--data",
                  "--max-data-mb", "100000", "-o", str(out)),
        env,
    )  # fmt: skip
    dump = (out / "dump.sql").stat().st_size
    log = cluster.log_path.stat().st_size
    print(
        f"capture --data: {seconds:.1f} s, peak RSS {peak / MB:,.0f} MB (planshift and pg_dump), "
        f"dump.sql {dump / MB:,.0f} MB, server log read {log / MB:,.0f} MB; "
        f"load average {load_average()}"
    )
    started = time.perf_counter()
    pg_dump = cluster.installation.bindir / "pg_dump"
    env_dump = {**os.environ, "PGHOST": str(cluster.socket_dir), "PGPORT": str(cluster.port)}
    with open(os.devnull, "wb") as sink:
        subprocess.run(
            [str(pg_dump), *DUMP_OPTIONS, "-U", "postgres", "shop"],
            env=env_dump, check=True, stdout=sink,
        )  # fmt: skip
    print(f"  (pg_dump alone, to /dev/null: {time.perf_counter() - started:.1f} s)")
    print("  " + "\n  ".join(line for line in output.splitlines() if "coverage" in line))
    names = [f"pg{major}" for major in targets]
    seconds, peak, output = timed_command(
        planshift("run", str(out / "workload.toml"), *[f"-t{n}" for n in names],
                  "--repetitions", "3", "--warmup", "0", "--store", str(work / "s.duckdb")),
        env,
    )  # fmt: skip
    setup = re.search(r"set up .* in ([\d.]+) s \((.*?)\)", output)
    print(
        f"run on {', '.join(names)}: {seconds:.1f} s in all, setup "
        f"{setup.group(1) if setup else '?'} s ({setup.group(2) if setup else '?'}), "
        f"peak RSS {peak / MB:,.0f} MB; load average {load_average()}"
    )
    progress = [line for line in output.splitlines() if line.startswith("setting up")]
    print(f"  progress lines during the setup: {len(progress)}, e.g. {progress[-1:] or '-'}")
    return out


@contextmanager
def fresh_targets(targets: Sequence[str]) -> Iterator[list[Server]]:
    clusters = [
        EmbeddedCluster(find_installation(major), name=f"bench-load{major}") for major in targets
    ]
    try:
        servers = []
        for cluster in clusters:
            cluster.start()
            servers.append(Server(cluster.name, cluster.conninfo, "embedded"))
        yield servers
    finally:
        for cluster in clusters:
            cluster.stop()


def measure(label: str, load: Callable[[], None]) -> None:
    started = time.perf_counter()
    with TreeMemory(os.getpid()) as memory:
        load()
    print(
        f"  {label:<52} {time.perf_counter() - started:7.1f} s   peak RSS of this process "
        f"{memory.peak / MB:,.0f} MB; load average {load_average()}"
    )


def compare_loaders(dsn: str, source: EmbeddedCluster, out: Path, targets: Sequence[str]) -> None:
    """The same database loaded into fresh --targets in four ways."""
    print(f"loading the database into fresh {', '.join(f'pg{t}' for t in targets)}:")
    workload = load_workload(out / "workload.toml")
    for together in (True, False):
        with fresh_targets(targets) as servers:
            label = "dump.sql streamed, COPY, " + ("targets together" if together else "one by one")

            def load(servers: list[Server] = servers, together: bool = together) -> None:
                prepare_servers(servers, workload, False, parallel=together)

            measure(label, load)
    pg_dump = source.installation.bindir / "pg_dump"
    env = {**os.environ, "PGHOST": str(source.socket_dir), "PGPORT": str(source.port)}
    custom = out / "dump.custom"
    started = time.perf_counter()
    subprocess.run(
        [str(pg_dump), *DUMP_OPTIONS, "-U", "postgres", "-Fc", "-Z0", "-f", str(custom), "shop"],
        env=env, check=True,
    )  # fmt: skip
    print(f"  (pg_dump -Fc -Z0: {time.perf_counter() - started:.1f} s)")
    with fresh_targets(targets) as servers:
        measure("pg_restore -j 2 of -Fc, targets together", lambda: restore(servers, custom))
    inserts = out / "inserts.sql"
    with inserts.open("wb") as stream:
        subprocess.run(
            [str(pg_dump), *DUMP_OPTIONS, "-U", "postgres", "--inserts", "--rows-per-insert=1000",
             "shop"], env=env, check=True, stdout=stream,
        )  # fmt: skip
    (out / "inserts.toml").write_text(
        "[setup]\nfiles = ['inserts.sql']\nsql = ''\n[[queries]]\nname = 'q'\nsql = 'SELECT 1'\n"
    )
    with_inserts = load_workload(out / "inserts.toml")
    with fresh_targets(targets) as servers:
        measure(
            "INSERT dump (capture before), streamed, targets together",
            lambda: prepare_servers(servers, with_inserts, False),
        )


def restore(servers: Sequence[Server], custom: Path) -> None:
    processes = []
    for server in servers:
        params = psycopg.conninfo.conninfo_to_dict(server.conninfo)
        major = server.name.removeprefix("bench-load")
        binary = find_installation(int(major)).bindir / "pg_restore"
        env = {**os.environ, "PGHOST": str(params["host"]), "PGPORT": str(params["port"])}
        argv = [str(binary), "-j", "2", "-U", "postgres", "-d", "postgres", str(custom)]
        processes.append(subprocess.Popen(argv, env=env))
    if any(process.wait() != 0 for process in processes):
        raise SystemExit("pg_restore failed")
    for server in servers:
        with psycopg.connect(server.conninfo, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=400, help="database size to build (MB)")
    parser.add_argument("--source", type=int, default=14, help="major version of the source")
    parser.add_argument("--targets", default="14,17", help="majors replayed on (comma-separated)")
    parser.add_argument("--loaders", action="store_true", help="also compare ways to load")
    args = parser.parse_args()
    targets = [int(t) for t in args.targets.split(",")]
    print(f"load average before: {load_average()} ({os.cpu_count()} CPUs)")
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    work = Path(tempfile.mkdtemp(prefix="bench-capture-"))
    try:
        source = EmbeddedCluster(
            find_installation(args.source), settings=SOURCE_SETTINGS, name="bench-src"
        )
        with source:
            dsn = build_source(source, args.mb)
            run_workload(source, dsn)
            out = capture_and_replay(source, dsn, work, targets, env)
            if args.loaders:
                compare_loaders(dsn, source, out, targets)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
