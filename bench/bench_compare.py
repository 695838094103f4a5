"""Compare throughput on a synthetic store: 100,000 queries x 2 targets x 10 samples.

    .venv/bin/python bench/bench_compare.py [--queries 100000] [--samples 10] [--repeat 3]

The store is built once: real captured PG 15 plans (index scan, bitmap heap scan) are stored
through the store API, then queries and observations are generated in DuckDB SQL (a
lognormal-ish duration per sample; 5% of queries 30% slower on the candidate; 2% flip to the
bitmap plan). Then `compare_sides` runs `--repeat` times; the median wall time, queries/s and
the peak RSS are printed.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from detector.compare import CompareOptions, compare_sides  # noqa: E402
from detector.model import Observation, parse_plan  # noqa: E402
from detector.store import Store  # noqa: E402

PLANS = ROOT / "tests" / "fixtures" / "plans" / "pg15"


def seed_plans(store: Store, target_id: int) -> tuple[str, str]:
    fingerprints = []
    for name in ("range_index_scan", "range_bitmap_scan"):
        document = json.loads((PLANS / f"{name}.json").read_text())["explain"]
        plan = parse_plan(document)
        observation = Observation(
            target_id=target_id,
            query_key="seed",
            params="[]",
            plan=plan,
            plan_json=json.dumps(document),
            duration_ms=plan.execution_ms,
            planning_ms=plan.planning_ms,
            client_ms=None,
            sample_index=0,
            collected_at=datetime.now(UTC),
        )
        store.add_observations([observation])
        fingerprints.append(observation.fingerprint)
    return fingerprints[0], fingerprints[1]


def build(path: Path, queries: int, samples: int) -> tuple[int, int]:
    with Store(path) as store:
        run = store.begin_run("bench", workload_hash=None, tool_version="bench", host="bench")
        base = store.add_target(run, "base", source="embedded", server_version_num=150018, gucs={}, info={})
        cand = store.add_target(run, "cand", source="embedded", server_version_num=150018, gucs={}, info={})
        index_fp, bitmap_fp = seed_plans(store, base)
        store.finish_run(run)
    con = duckdb.connect(str(path))
    con.execute("DELETE FROM observations WHERE query_key = 'seed'")
    con.execute(
        "INSERT INTO queries SELECT 'q' || i, 'query_' || i, 'SELECT ' || i, NULL FROM range(?) t(i)",
        [queries],
    )
    con.execute(
        f"""
        INSERT INTO observations (run_id, target_id, query_key, point, params, sample_index,
            fingerprint, source, total_cost, startup_cost, plan_rows, actual_rows, duration_ms,
            planning_ms, client_ms, shared_hit, shared_read, shared_dirtied, shared_written,
            temp_read, temp_written, exact_heap_blocks, lossy_heap_blocks, io_read_ms, collected_at)
        SELECT {run}, t.target_id, 'q' || q.i, NULL, '[]', s.i,
            CASE WHEN t.target_id = {cand} AND q.i % 50 = 7 THEN '{bitmap_fp}' ELSE '{index_fp}' END,
            'explain', 1000.0, 0.5, 100, 100,
            (1.0 + q.i % 17) * exp(0.1 * (random() + random() + random() - 1.5))
                * CASE WHEN t.target_id = {cand} AND q.i % 20 = 3 THEN 1.3 ELSE 1.0 END,
            0.05, NULL, 100, 0, 0, 0, 0, 0, NULL, NULL, 0.0, now()::TIMESTAMP
        FROM range(?) q(i), range(?) s(i), (VALUES ({base}), ({cand})) t(target_id)
        """,
        [queries, samples],
    )
    con.close()
    return base, cand


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.duckdb"
        started = time.perf_counter()
        base_id, cand_id = build(path, args.queries, args.samples)
        print(f"built store: {args.queries} queries x 2 targets x {args.samples} samples "
              f"in {time.perf_counter() - started:.1f} s ({path.stat().st_size / 1e6:.0f} MB)")
        timings = []
        result = None
        for _ in range(args.repeat):
            result = None  # the previous run's objects are freed before the clock starts
            with Store(path, read_only=True) as store:
                targets = {t.target_id: t for t in store.targets()}
                started = time.perf_counter()
                result = compare_sides(store, targets[base_id], targets[cand_id], CompareOptions(noise_run=None))
                timings.append(time.perf_counter() - started)
        assert result is not None
        counts = result.verdict_counts()
        median = statistics.median(timings)
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"compare: median {median:.2f} s over {args.repeat} runs "
              f"({', '.join(f'{t:.2f}' for t in timings)}), {args.queries / median:,.0f} queries/s")
        print(f"verdicts: {counts}; findings: {len(result.findings)}")
        print(f"peak RSS: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
