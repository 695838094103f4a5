"""What measuring costs: per-node timing vs TIMING OFF vs plain, and executions per second.

    .venv/bin/python bench/bench_overhead.py [--major 15] [--scale 10] [--repetitions 15]
        [--range-fraction 0.3] [--seconds 10] [--rounds 3] [--no-modes] [--no-demo] [--no-rate]

Everything runs on embedded PostgreSQL (`--major`, default 15), loaded with `pgbench -i -s SCALE`.
Figures are printed, never asserted; `os.getloadavg()` is printed beside them.

1. Measurement overhead by timing mode. Each join query is forced into a Hash Join (variant
   `hash_join`) and a Nested Loop (`nested_loop`) with enable_hashjoin / enable_nestloop /
   enable_mergejoin (serial plans: max_parallel_workers_per_gather = 0). planshift's own runner
   measures both variants interleaved (A B, B A ...) once per workload `timing` mode: "plain" (the
   bare statement's pipeline round trip, timed by the client), "off" (EXPLAIN ANALYZE, TIMING OFF:
   the server's Execution Time) and "on" (EXPLAIN ANALYZE with per-node timing); the durations are
   read back from the store. Printed: the median of each plan, the ratio of the medians and the
   median of the per-sample (paired) ratios. `self_join` is a pair whose plain durations are close
   (a range of `--range-fraction` of the accounts joined to the accounts); in `tellers` (accounts
   joined to three tellers of branch 1) the nested loop rescans a Materialize node once per
   account row, so per-node instrumentation runs millions of times more there than in the hash
   join. With --demo (default) the same table
   for the demo workload's point_select, sum_range and simple_range, variants current/proposed,
   on a cluster of its own with the demo target's settings (shared_buffers = 16MB).
2. Executions per second of one measured point-query EXPLAIN: planshift's `one_statement` (one
   libpq pipeline: BEGIN, set_config with the advisory unlock, EXPLAIN, ROLLBACK, all but the
   EXPLAIN prepared once per session), the former five statements (an unlock of its own)
   pipelined unprepared through psycopg's cursors, the old four round trips (BEGIN; SELECT
   set_config(...); EXPLAIN; ROLLBACK), the bare EXPLAIN on the same psycopg connection (a
   reference: psycopg's own cost), `pgbench -n -c 1 -j 1 -T SECONDS` running the same EXPLAIN
   (the target: 80% of it), and pgbench sending planshift's four statements in one pipeline
   (\\startpipeline, -M extended: what the protocol costs unprepared, without Python), and
   the whole runner (`run_workload` on the point query with its parameter, one side, no
   priming: one_statement, the plan parsed, the observation stored);
   `--rounds` rounds, interleaved, medians printed. The cluster has shared_buffers = 512MB and
   its accounts are read into them first: with the default 128MB, scale 10 does not fit, and
   each method's rate depended on the pages the method before it had left in the cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from collectors.runner import RunOptions, query_key, run_workload  # noqa: E402
from collectors.servers.embedded import EmbeddedCluster  # noqa: E402
from collectors.servers.installations import Installation, find_installation  # noqa: E402
from collectors.servers.targets import Server  # noqa: E402
from collectors.session import connect, one_statement  # noqa: E402
from detector.jobs.workload import load_workload  # noqa: E402
from detector.model import signature  # noqa: E402
from detector.model.workload import Workload  # noqa: E402
from detector.store import Store  # noqa: E402

DEBIAN_PGBENCH = Path("/usr/lib/postgresql/15/bin/pgbench")
MODES = (
    ("plain", "plain (bare statement, client-timed)"),
    ("off", "EXPLAIN ANALYZE, TIMING OFF"),
    ("on", "EXPLAIN ANALYZE (per-node timing)"),
)
JOIN_VARIANTS = {
    "hash_join": {"enable_hashjoin": "on", "enable_nestloop": "off", "enable_mergejoin": "off"},
    "nested_loop": {"enable_hashjoin": "off", "enable_nestloop": "on", "enable_mergejoin": "off"},
}
POINT_EXPLAIN = (
    "EXPLAIN (ANALYZE, TIMING OFF, BUFFERS, SETTINGS, FORMAT JSON) "
    "SELECT abalance FROM pgbench_accounts WHERE aid = "
)
POINT_GUCS = {"statement_timeout": "60s", "random_page_cost": "4"}
DEMO_QUERIES = ("point_select", "sum_range", "simple_range")


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def pgbench_path(installation: Installation) -> Path:
    own = installation.bindir / "pgbench"
    return own if own.exists() else DEBIAN_PGBENCH


def join_workload(directory: Path, rows: int, fraction: float, repetitions: int) -> Path:
    upper = max(1, int(rows * fraction))
    text = f"""
[workload]
name = "bench-overhead-joins"
repetitions = {repetitions}
warmup = 2
prime = false

[variants.hash_join]
{_toml_gucs(JOIN_VARIANTS["hash_join"])}
max_parallel_workers_per_gather = "0"

[variants.nested_loop]
{_toml_gucs(JOIN_VARIANTS["nested_loop"])}
max_parallel_workers_per_gather = "0"

[[queries]]
name = "self_join"
sql = "SELECT count(*), sum(b.abalance) FROM pgbench_accounts a JOIN pgbench_accounts b ON a.aid = b.aid WHERE a.aid BETWEEN 1 AND {upper}"

[[queries]]
name = "tellers"
sql = "SELECT count(*), sum(a.abalance) FROM pgbench_accounts a JOIN pgbench_tellers t ON a.bid = t.bid WHERE t.tid <= 3"
"""  # noqa: E501
    path = directory / "joins.toml"
    path.write_text(text)
    return path


def runner_rate(server: Server, tmp: Path, rows: int, executions: int) -> float:
    """Executions per second of the whole runner (`run_workload`: the statement, parsing its
    plan, storing the observation) on the same point query, one side, no priming."""
    path = tmp / "point.toml"
    path.write_text(f"""
[workload]
name = "bench-overhead-point"
repetitions = {executions}
warmup = 0
prime = false

[variants.point]
random_page_cost = "{POINT_GUCS["random_page_cost"]}"

[[queries]]
name = "point"
sql = "SELECT abalance FROM pgbench_accounts WHERE aid = %(aid)s"
params = {{ aid = {{ range = [1, {rows}] }} }}
""")
    store_path = tmp / "point.duckdb"
    store_path.unlink(missing_ok=True)
    ends: list[float] = []  # of every execution

    def executed(_: str, __: int) -> None:
        ends.append(time.perf_counter())

    with Store(store_path) as store:
        run_workload(load_workload(path), [server], store, RunOptions(label="rate"), executed)
    # between the first execution and the last: connecting and storing are not executions
    return (len(ends) - 1) / (ends[-1] - ends[0])


def _toml_gucs(gucs: dict[str, str]) -> str:
    return "\n".join(f'{name} = "{value}"' for name, value in gucs.items())


def measure_modes(
    workload: Workload, server: Server, store: Store, base: str, cand: str
) -> dict[str, dict[str, Any]]:
    """Per mode and query: medians of both sides, ratios, plan signatures, load average."""
    results: dict[str, dict[str, Any]] = {}
    for index, (mode, _) in enumerate(MODES):
        # the workload's setup runs on the first run only; it leaves the data the others need
        run = dataclasses.replace(workload, timing=mode, setup=workload.setup if index == 0 else ())
        run_id = run_workload(run, [server], store, RunOptions(label=f"overhead-{mode}"))
        names = {t.target_id: t.name for t in store.targets([run_id])}
        by_side: dict[str, dict[str, dict[int, Any]]] = {}
        for row in store.observations(list(names)):
            by_side.setdefault(row.query_key, {}).setdefault(names[row.target_id], {})[
                row.sample_index
            ] = row
        for query in run.queries:
            sides = by_side[query_key(query)]
            a, b = sides[base], sides[cand]
            a_ms = [a[i].duration_ms for i in sorted(a)]
            b_ms = [b[i].duration_ms for i in sorted(b)]
            paired = [a[i].duration_ms / b[i].duration_ms for i in sorted(a) if i in b]
            plans = {
                name: {row.fingerprint for row in rows.values()} for name, rows in sides.items()
            }
            results.setdefault(query.name, {})[mode] = {
                "a": statistics.median(a_ms),
                "b": statistics.median(b_ms),
                "ratio": statistics.median(a_ms) / statistics.median(b_ms),
                "paired": statistics.median(paired),
                "plans": plans,
                "load": load(),
            }
    return results


def print_modes(
    title: str, results: dict[str, dict[str, Any]], store: Store, base: str, cand: str
) -> None:
    print(f"\n{title}")
    for query, by_mode in results.items():
        plans = by_mode["off"]["plans"]
        print(f"  {query}:")
        for side in (base, cand):
            shown = "; ".join(signature(store.plan(fp)) for fp in sorted(plans[side]))
            print(f"    {side:<12} {shown}")
        if plans[base] == plans[cand]:
            print("    (both sides ran the same plan)")
        head = f"{base} ms", f"{cand} ms", f"{base}/{cand}", "paired"
        print(f"    {'mode':<38}{head[0]:>14}{head[1]:>16}{head[2]:>24}{head[3]:>8}")
        for mode, label in MODES:
            row = by_mode[mode]
            print(
                f"    {label:<38}{row['a']:>14.3f}{row['b']:>16.3f}{row['ratio']:>24.2f}"
                f"{row['paired']:>8.2f}   {row['load']}"
            )


def rate_loop(seconds: float, one: Callable[[int], object], rows: int) -> float:
    rng = random.Random(7)
    count = 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        one(rng.randint(1, rows))
        count += 1
    return count / (time.perf_counter() - started)


def measure_rates(
    server: Server, pgbench: Path, scale: int, seconds: float, rounds: int, tmp: Path
) -> dict[str, list[float]]:
    rows = 100000 * scale
    explain = (
        "EXPLAIN (ANALYZE, TIMING OFF, BUFFERS, SETTINGS, FORMAT JSON) "
        "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
    )
    script = tmp / "explain.sql"
    script.write_text(f"\\set aid random(1, 100000 * :scale)\n{explain}")
    # planshift's four statements in one pipeline, sent by a C client: what the protocol costs
    settings = ", ".join(f"set_config('{k}', '{v}', true)" for k, v in POINT_GUCS.items())
    pipelined = tmp / "pipelined.sql"
    pipelined.write_text(
        f"\\set aid random(1, 100000 * :scale)\n\\startpipeline\nBEGIN;\n"
        f"SELECT pg_advisory_unlock_all(), {settings};\n{explain}ROLLBACK;\n\\endpipeline\n"
    )
    flat = [item for pair in POINT_GUCS.items() for item in pair]
    setters = "SELECT " + ", ".join("set_config(%s, %s, true)" for _ in POINT_GUCS)

    def planshift(conn: Any) -> Callable[[int], object]:
        return lambda aid: one_statement(conn, f"{POINT_EXPLAIN}{aid}", None, POINT_GUCS)

    def cursors(conn: Any) -> Callable[[int], None]:
        def one(aid: int) -> None:  # the same five statements through psycopg's cursors
            statement, control = conn.cursor(), conn.cursor()
            with conn.pipeline():
                control.execute("BEGIN")
                control.execute(setters, flat)
                statement.execute(f"{POINT_EXPLAIN}{aid}")
                control.execute("ROLLBACK")
                control.execute("SELECT pg_advisory_unlock_all()")
            statement.fetchone()

        return one

    def four_trips(conn: Any) -> Callable[[int], None]:
        def one(aid: int) -> None:
            conn.execute("BEGIN")
            conn.execute(setters, flat)
            conn.execute(f"{POINT_EXPLAIN}{aid}").fetchone()
            conn.execute("ROLLBACK")

        return one

    def bare(conn: Any) -> Callable[[int], None]:
        return lambda aid: conn.execute(f"{POINT_EXPLAIN}{aid}").fetchone()

    def run_pgbench(path: Path, protocol: str) -> float:
        command = [str(pgbench), "-n", "-c", "1", "-j", "1", "-T", str(int(seconds))]
        command += ["-M", protocol, "-s", str(scale), "-f", str(path), server.conninfo]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        match = re.search(r"tps = ([\d.]+)", out)
        if match is None:
            raise RuntimeError(f"no tps in pgbench's output:\n{out}")
        return float(match.group(1))

    with connect(server) as conn:  # every page of the accounts and their key into the cache
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        conn.execute("SELECT sum(abalance) FROM pgbench_accounts WHERE aid > 0").fetchone()
    rates: dict[str, list[float]] = {}
    loops = {"planshift": planshift, "cursors": cursors, "four_trips": four_trips, "bare": bare}
    for _ in range(rounds):
        for name, make in loops.items():
            with connect(server) as conn:
                rates.setdefault(name, []).append(rate_loop(seconds, make(conn), rows))
        # the runner's own loop, sized to run about as long as the others
        executions = max(500, int(seconds * statistics.median(rates["planshift"]) * 0.7))
        rates.setdefault("runner", []).append(runner_rate(server, tmp, rows, executions))
        rates.setdefault("pgbench", []).append(run_pgbench(script, "simple"))
        rates.setdefault("pgbench_pipeline", []).append(run_pgbench(pipelined, "extended"))
        rates.setdefault("load", []).append(os.getloadavg()[0])
    return rates


def print_rates(rates: dict[str, list[float]], seconds: float) -> None:
    labels = {
        "planshift": "planshift one_statement (4 statements, 3 prepared, 1 round trip)",
        "runner": "planshift's runner: one_statement, plan parsed, observation stored",
        "cursors": "the former 5 statements through psycopg cursors, unprepared",
        "four_trips": "old way: BEGIN; set_config; EXPLAIN; ROLLBACK (4 trips)",
        "bare": "bare EXPLAIN on psycopg (reference, no transaction)",
        "pgbench": "pgbench -n -c 1 -j 1 -f explain.sql (simple protocol)",
        "pgbench_pipeline": "pgbench, planshift's 4 statements in 1 pipeline (-M extended)",
    }
    pgbench = statistics.median(rates["pgbench"])
    print(f"  {'method':<62}{'exec/s':>9}{'% of pgbench':>14}   rounds")
    for name, label in labels.items():
        value = statistics.median(rates[name])
        each = " ".join(f"{r:.0f}" for r in rates[name])
        print(f"  {label:<62}{value:>9.0f}{value / pgbench:>13.0%}   {each}")
    loads = " ".join(f"{value:.2f}" for value in rates["load"])
    print(f"  ({seconds:g} s per method per round; 1-min load after each round: {loads})")


def start(installation: Installation, name: str, settings: dict[str, str]) -> EmbeddedCluster:
    cluster = EmbeddedCluster(installation, name=name, settings=settings)
    cluster.start()
    return cluster


def server_version(server: Server) -> str:
    with connect(server) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "?"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--major", type=int, default=15)
    parser.add_argument("--scale", type=int, default=10, help="pgbench scale (default 10)")
    parser.add_argument("--repetitions", type=int, default=15, help="samples per side and mode")
    parser.add_argument("--range-fraction", type=float, default=0.3)
    parser.add_argument("--seconds", type=float, default=10, help="per executions/s measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-modes", dest="modes", action="store_false")
    parser.add_argument("--no-demo", dest="demo", action="store_false")
    parser.add_argument("--no-rate", dest="rate", action="store_false")
    args = parser.parse_args(argv)
    installation = find_installation(args.major)
    pgbench = pgbench_path(installation)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        cluster = start(installation, "bench-overhead", {"shared_buffers": "512MB"})
        try:
            server = Server(name=installation.name, conninfo=cluster.conninfo, source="embedded")
            print(
                f"PostgreSQL {server_version(server)} (embedded, {installation.bindir}); {load()}"
            )
            subprocess.run(
                [str(pgbench), "-i", "-q", "-s", str(args.scale), cluster.conninfo],
                capture_output=True,
                text=True,
                check=True,
            )
            if args.modes:
                rows = 100000 * args.scale
                path = join_workload(tmp, rows, args.range_fraction, args.repetitions)
                with Store(tmp / "joins.duckdb") as store:
                    results = measure_modes(
                        load_workload(path), server, store, "hash_join", "nested_loop"
                    )
                    print_modes(
                        f"1. Measurement overhead by timing mode: pgbench scale {args.scale} "
                        f"({rows:,} accounts), {args.repetitions} samples per side, interleaved, "
                        "serial plans",
                        results,
                        store,
                        "hash_join",
                        "nested_loop",
                    )
            if args.rate:
                print(
                    f"\n2. Executions per second: the point-query EXPLAIN (ANALYZE, TIMING OFF, "
                    f"BUFFERS, SETTINGS, FORMAT JSON), 1 client, median of {args.rounds} rounds"
                )
                print_rates(
                    measure_rates(server, pgbench, args.scale, args.seconds, args.rounds, tmp),
                    args.seconds,
                )
        finally:
            cluster.stop()
        if args.demo:
            run_demo(installation, tmp, args.repetitions)
    print(f"\n({time.perf_counter() - began:.0f} s in all; {load()})")


def run_demo(installation: Installation, tmp: Path, repetitions: int) -> None:
    demo = load_workload(ROOT / "detector" / "jobs" / "demo_workload.toml")
    settings = dict(demo.targets[0].settings) if demo.targets else {}
    queries = tuple(demo.query(name) for name in DEMO_QUERIES)
    demo = dataclasses.replace(demo, queries=queries, repetitions=repetitions)
    cluster = start(installation, "bench-overhead-demo", settings)
    try:
        server = Server(name=installation.name, conninfo=cluster.conninfo, source="embedded")
        with Store(tmp / "demo.duckdb") as store:
            results = measure_modes(demo, server, store, "current", "proposed")
            shown = ", ".join(f"{k} = {v}" for k, v in settings.items())
            print_modes(
                f"1b. The demo workload ({shown}), {repetitions} samples per side, interleaved",
                results,
                store,
                "current",
                "proposed",
            )
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
