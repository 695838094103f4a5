"""Timing fidelity: does each planshift timing mode rank two plans as plain execution does?

    .venv/bin/python bench/bench_timing_fidelity.py [--major 15] [--samples 30] [--rounds 3]
        [--json FILE]

One embedded PostgreSQL cluster (`--major`, default 15), five pairs of plans for the same
statement, each plan forced by enable_* settings (serial plans, JIT off):

- `hash vs memoize`: a fact range joined to a dimension, Hash Join against Nested Loop +
  Memoize over the dimension's primary key, aggregated; `hash vs memoize, rows`: the same join
  sending its 5,000 rows to the client;
- `bitmap vs index`: a range over an uncorrelated indexed column, Bitmap Heap Scan against
  Index Scan;
- `seq vs index`: an aggregate over 20% of the primary key, Seq Scan against Index Scan;
- `rows to client`: 5,000 rows of the primary key range sent to the client, Seq Scan against
  Index Scan (plain execution pays for sending and reading the rows on both sides; EXPLAIN
  ANALYZE discards them).

Each sample's parameters run on both plans in every way of timing, interleaved (the eight
executions in a seeded random order per sample), after one unmeasured execution of each plan:
`client` is plain execution timed by the client (psycopg, autocommit, unprepared, the plan's
settings set on the session beforehand, execute + fetch all rows): the reference; `plain`, `off` and `on`
are planshift's timing modes, through its own executor (collectors/session.one_statement):
the bare statement's round trip, EXPLAIN ANALYZE TIMING OFF's and TIMING ON's Execution Time;
`libpq` is plain execution whose rows libpq receives but nothing turns into Python objects (a
second reference: what the client's own per-row work adds).
Per pair and way of timing: the median of the per-sample ratios (second plan / first plan),
per round; printed: the median over rounds, and each mode's deviation from the client's ratio.
The default mode should be within 5% of the client's ratio on every pair. Figures are printed
with the load average, never asserted; `--json FILE` keeps them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from collectors.host import cpu_count  # noqa: E402
from collectors.servers.embedded import EmbeddedCluster  # noqa: E402
from collectors.servers.installations import find_installation  # noqa: E402
from collectors.session import one_statement  # noqa: E402

SETUP = """
CREATE TABLE dim (k int PRIMARY KEY, name text NOT NULL);
INSERT INTO dim SELECT i, md5(i::text) FROM generate_series(1, 2000) i;
CREATE TABLE fact (id int PRIMARY KEY, dk int NOT NULL, k int NOT NULL, v int NOT NULL, pad text NOT NULL);
INSERT INTO fact SELECT i, 1 + (hashint4(i) & 1048575) % 2000, (hashint4(i + 7) & 1048575) % 200000,
    i % 1000, repeat('x', 80) FROM generate_series(1, 200000) i;
CREATE INDEX fact_k ON fact (k);
VACUUM ANALYZE dim;
VACUUM ANALYZE fact;
"""
SERIAL = {"max_parallel_workers_per_gather": "0", "jit": "off"}
SEQ = {"enable_indexscan": "off", "enable_bitmapscan": "off", "enable_indexonlyscan": "off"}
INDEX = {"enable_seqscan": "off", "enable_bitmapscan": "off", "enable_indexonlyscan": "off"}


@dataclass(frozen=True)
class Pair:
    name: str
    sql: str
    low: int
    high: int
    first: dict[str, str]  # the first plan's settings ...
    second: dict[str, str]  # ... and the second's
    nodes: tuple[str, str]  # a node type each plan must have


PAIRS = (
    Pair(
        "hash vs memoize",
        "SELECT count(*), sum(length(d.name)) FROM fact f JOIN dim d ON d.k = f.dk "
        "WHERE f.id BETWEEN %(lo)s AND %(lo)s + 19999",
        1,
        180000,
        {"enable_nestloop": "off", "enable_mergejoin": "off"},
        {"enable_hashjoin": "off", "enable_mergejoin": "off", "enable_memoize": "on"},
        ("Hash Join", "Memoize"),
    ),
    Pair(
        "hash vs memoize, rows",
        "SELECT f.id, d.name FROM fact f JOIN dim d ON d.k = f.dk "
        "WHERE f.id BETWEEN %(lo)s AND %(lo)s + 4999",
        1,
        195000,
        {"enable_nestloop": "off", "enable_mergejoin": "off"},
        {"enable_hashjoin": "off", "enable_mergejoin": "off", "enable_memoize": "on"},
        ("Hash Join", "Memoize"),
    ),
    Pair(
        "bitmap vs index",
        "SELECT sum(v) FROM fact WHERE k BETWEEN %(lo)s AND %(lo)s + 2999",
        1,
        197000,
        {"enable_indexscan": "off", "enable_seqscan": "off"},
        {"enable_bitmapscan": "off", "enable_seqscan": "off"},
        ("Bitmap Heap Scan", "Index Scan"),
    ),
    Pair(
        "seq vs index",
        "SELECT sum(v) FROM fact WHERE id BETWEEN %(lo)s AND %(lo)s + 39999",
        1,
        160000,
        SEQ,
        INDEX,
        ("Seq Scan", "Index Scan"),
    ),
    Pair(
        "rows to client",
        "SELECT id, pad FROM fact WHERE id BETWEEN %(lo)s AND %(lo)s + 4999",
        1,
        195000,
        SEQ,
        INDEX,
        ("Seq Scan", "Index Scan"),
    ),
)
WAYS = ("client", "libpq", "plain", "off", "on")
MODES = WAYS[2:]  # planshift's
EXPLAIN = {
    "off": "EXPLAIN (ANALYZE, TIMING OFF, BUFFERS, FORMAT JSON) ",
    "on": "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ",
}


def settings(pair: Pair, side: int) -> dict[str, str]:
    return {**SERIAL, **(pair.first if side == 0 else pair.second)}


def client_ms(
    conn: psycopg.Connection[Any], pair: Pair, side: int, params: dict[str, int]
) -> float:
    """Plain execution as an application runs it: settings on the session, then timed."""
    for name, value in settings(pair, side).items():
        conn.execute("SELECT set_config(%s, %s, false)", [name, value])
    with conn.cursor() as cursor:
        started = time.perf_counter()
        cursor.execute(pair.sql, params)
        cursor.fetchall()
        elapsed = (time.perf_counter() - started) * 1000.0
    conn.execute("RESET ALL")
    return elapsed


def libpq_ms(conn: psycopg.Connection[Any], pair: Pair, side: int, params: dict[str, int]) -> float:
    """Plain execution without turning the rows into Python objects: libpq receives them."""
    for name, value in settings(pair, side).items():
        conn.execute("SELECT set_config(%s, %s, false)", [name, value])
    text = psycopg.ClientCursor(conn).mogrify(pair.sql, params).encode()
    started = time.perf_counter()
    result = conn.pgconn.exec_(text)
    elapsed = (time.perf_counter() - started) * 1000.0
    if result.status != psycopg.pq.ExecStatus.TUPLES_OK:
        raise SystemExit(f"{pair.name}: {result.error_message!r}")
    conn.execute("RESET ALL")
    return elapsed


def planshift_ms(
    conn: psycopg.Connection[Any], pair: Pair, side: int, params: dict[str, int], way: str
) -> float:
    gucs = settings(pair, side)
    if way == "plain":
        return one_statement(conn, pair.sql, params, gucs, first_value=False)[1]
    text, _ = one_statement(conn, EXPLAIN[way] + pair.sql, params, gucs)
    return float(json.loads(text)[0]["Execution Time"])


def check_plans(conn: psycopg.Connection[Any], pair: Pair) -> None:
    params = {"lo": pair.low}
    for side, node in enumerate(pair.nodes):
        text, _ = one_statement(
            conn, "EXPLAIN (FORMAT JSON) " + pair.sql, params, settings(pair, side)
        )
        if f'"Node Type": "{node}"' not in text:
            raise SystemExit(f"{pair.name}: plan {side + 1} has no {node}: {text}")


def measure_round(
    conn: psycopg.Connection[Any], planshift: psycopg.Connection[Any], samples: int, seed: int
) -> dict[str, dict[str, float]]:
    """Per pair and way: the median of the per-sample ratios (second plan / first plan)."""
    rng = random.Random(seed)
    ratios: dict[str, dict[str, list[float]]] = {p.name: {w: [] for w in WAYS} for p in PAIRS}
    times: dict[str, list[float]] = {}
    for _ in range(samples):
        for pair in PAIRS:
            params = {"lo": rng.randint(pair.low, pair.high)}
            for side in (0, 1):  # unmeasured: these parameters' pages cached for both plans
                client_ms(conn, pair, side, params)
            # a fresh order per sample: in a fixed rotation each plan of a way nearly always ran
            # right after the same execution, and that order showed in the ratios
            runs = [(way, side) for way in WAYS for side in (0, 1)]
            rng.shuffle(runs)
            timed: dict[tuple[str, int], float] = {}
            for way, side in runs:
                if way == "client":
                    timed[(way, side)] = client_ms(conn, pair, side, params)
                elif way == "libpq":
                    timed[(way, side)] = libpq_ms(conn, pair, side, params)
                else:
                    timed[(way, side)] = planshift_ms(planshift, pair, side, params, way)
            for way in WAYS:
                ratios[pair.name][way].append(timed[(way, 1)] / timed[(way, 0)])
            for (way, side), ms in timed.items():
                times.setdefault(f"{pair.name}|{way}|{side}", []).append(ms)
    found = {
        name: {way: statistics.median(values) for way, values in by_way.items()}
        for name, by_way in ratios.items()
    }
    found["median_ms"] = {key: statistics.median(values) for key, values in times.items()}
    return found


def report(rounds: list[dict[str, dict[str, float]]], meta: dict[str, Any]) -> dict[str, Any]:
    medians = {
        p.name: {w: statistics.median(r[p.name][w] for r in rounds) for w in WAYS} for p in PAIRS
    }
    deviation = {
        name: {w: by_way[w] / by_way["client"] - 1 for w in WAYS[1:]}
        for name, by_way in medians.items()
    }
    worst = {w: max(abs(deviation[p.name][w]) for p in PAIRS) for w in WAYS[1:]}
    print(
        f"timing fidelity, PostgreSQL {meta['version']}, {meta['cpus']} CPUs, load "
        f"{meta['load_before']} -> {meta['load_after']} (1-min), {meta['rounds']} rounds x "
        f"{meta['samples']} samples, {meta['date']}"
    )
    print("ratio = second plan / first plan (median of per-sample ratios; median of the rounds);")
    print("in brackets: the mode's deviation from plain execution timed by the client\n")
    head = f"{'pair':<22} {'client':>7}" + "".join(f"{w:>16}" for w in WAYS[1:])
    print(head)
    for pair in PAIRS:
        by_way = medians[pair.name]
        line = f"{pair.name:<22} {by_way['client']:>7.3f}"
        line += "".join(f"{by_way[w]:>8.3f} ({deviation[pair.name][w]:+6.1%})" for w in WAYS[1:])
        print(line)
    print(f"{'worst |deviation|':<30}" + "".join(f"{worst[w]:>16.1%}" for w in WAYS[1:]))
    print("\nper round (client / libpq / plain / off / on):")
    for pair in PAIRS:
        cells = ["/".join(f"{r[pair.name][w]:.2f}" for w in WAYS) for r in rounds]
        print(f"  {pair.name:<22} " + "   ".join(cells))
    print("\nmedian ms of the first / second plan (first round):")
    for pair in PAIRS:
        cells = [
            "/".join(f"{rounds[0]['median_ms'][f'{pair.name}|{w}|{side}']:.2f}" for side in (0, 1))
            for w in WAYS
        ]
        print(
            f"  {pair.name:<22} " + "   ".join(f"{w} {c}" for w, c in zip(WAYS, cells, strict=True))
        )
    print("\nagainst the libpq reference (the rows received, not turned into Python objects):")
    for pair in PAIRS:
        by_way = medians[pair.name]
        cells = "".join(f"{m:>7} {by_way[m] / by_way['libpq'] - 1:+6.1%}" for m in MODES)
        print(f"  {pair.name:<22} libpq {by_way['libpq']:.3f}{cells}")
    best = min(MODES, key=lambda w: worst[w])
    print(
        f"\nclosest to plain execution on every pair: {best} (worst deviation {worst[best]:.1%}; "
        f"target 5%: {'met' if worst[best] <= 0.05 else 'not met'})"
    )
    return {
        "meta": meta,
        "ratios": medians,
        "deviation": deviation,
        "worst": worst,
        "rounds": rounds,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--major", type=int, default=15)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args(argv)
    cluster = EmbeddedCluster(
        find_installation(args.major), name="bench-fidelity", settings={"shared_buffers": "128MB"}
    )
    cluster.start()
    try:
        with (
            psycopg.connect(cluster.conninfo, autocommit=True) as conn,
            psycopg.connect(
                cluster.conninfo, autocommit=True, cursor_factory=psycopg.ClientCursor
            ) as planshift,
        ):
            # psycopg prepares a statement after 5 executions, and a prepared statement keeps
            # its plan when the settings change: the reference would time one plan twice
            conn.prepare_threshold = None
            for statement in SETUP.split(";\n"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("SELECT count(*) FROM fact")  # into the cache
            planshift.adapters.register_loader("json", psycopg.types.string.TextLoader)
            for pair in PAIRS:
                check_plans(planshift, pair)
            version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
            before = round(os.getloadavg()[0], 2)
            rounds = [
                measure_round(conn, planshift, args.samples, seed) for seed in range(args.rounds)
            ]
            meta = {
                "version": version,
                "cpus": cpu_count(),
                "load_before": before,
                "load_after": round(os.getloadavg()[0], 2),
                "rounds": args.rounds,
                "samples": args.samples,
                "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            }
    finally:
        cluster.stop()
    result = report(rounds, meta)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
