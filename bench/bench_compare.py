"""Compare throughput on a synthetic store: N queries x 2 targets x 10 samples, paired.

    .venv/bin/python bench/bench_compare.py [--queries 100000] [--samples 10] [--repeat 3]
        [--store PATH] [--dump OUT.json] [--profile cprofile|pyinstrument]

The store is built in a child process (so the peak RSS of this process is the comparison's):
real captured PG 15 plans (index scan, bitmap heap scan) are stored through the store API,
then queries and observations are generated in DuckDB SQL. Both targets belong to one run
and were "measured" (source embedded), every query has samples 0..N-1 on both sides: the
sides are interleaved and `compare_sides` takes the paired path, which the bench checks.
Per sample, a lognormal-ish duration shared by both sides (the parameters) times a small
per-side noise (large on one query in 13); on the candidate 5% of queries are 30% slower,
5% 7% slower, 2.5% 30% faster; 2% flip to the bitmap plan, whose
cost is within 1% of the index scan's on one query in four (a near-tie).

`--store PATH` keeps the store (reused when it exists: the same data before and after a
change); `--dump` writes every verdict and finding as JSON for an exact before/after diff.
Then `compare_sides` runs `--repeat` times: wall and CPU time per run, medians, queries/s,
peak RSS after the first comparison and after all (getrusage of this process; the build's child
apart), the load average, and where the time went per phase (read, pairing/build, stats, BH,
rules).
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import detector.engine.comparison.compare  # noqa: E402
import detector.engine.comparison.query_pairs  # noqa: E402
import detector.engine.comparison.verdicts  # noqa: E402
import detector.engine.false_discoveries  # noqa: E402
from detector.engine.comparison.compare import compare_sides  # noqa: E402
from detector.engine.comparison.options import CompareOptions  # noqa: E402
from detector.model import ComparisonResult, Observation, parse_plan  # noqa: E402
from detector.store import Store  # noqa: E402

PLANS = ROOT / "tests" / "fixtures" / "plans" / "pg15"
PHASE_OF = {  # (module, attribute): phase; time of nested phases is not counted twice
    (Store, "grouped_samples"): "read",
    (Store, "plan_examples"): "read",
    (Store, "query_texts"): "read",
    (detector.engine.comparison.compare, "pair_sides"): "pairing/build",
    (detector.engine.comparison.compare, "timing_verdicts"): "stats",  # before verdicts.py
    (detector.engine.comparison.verdicts, "timing_verdicts"): "stats",
    (detector.engine.false_discoveries, "control_false_discoveries"): "BH",
    (detector.engine.false_discoveries, "control_own_false_discoveries"): "BH",
    (detector.engine.comparison.compare, "compared"): "pairing/build",
    (detector.engine.comparison.compare, "apply_rules"): "rules",
}


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


def build(path: Path, queries: int, samples: int) -> None:
    with Store(path) as store:
        run = store.begin_run("bench", workload_hash=None, tool_version="bench", host="bench")
        base = store.add_target(
            run, "base", source="embedded", server_version_num=150018, gucs={}, info={}
        )
        cand = store.add_target(
            run, "cand", source="embedded", server_version_num=150018, gucs={}, info={}
        )
        index_fp, bitmap_fp = seed_plans(store, base)
        store.finish_run(run)
    con = duckdb.connect(str(path))
    con.execute("SELECT setseed(0.42)")
    con.execute("DELETE FROM observations WHERE query_key = 'seed'")
    con.execute(
        "INSERT INTO queries SELECT 'q' || i, 'query_' || i, 'SELECT ' || i, NULL FROM range(?) t(i)",
        [queries],
    )
    flipped = f"t.target_id = {cand} AND q.i % 50 = 7"
    con.execute(
        f"""
        INSERT INTO observations (run_id, target_id, query_key, point, params, sample_index,
            fingerprint, source, total_cost, startup_cost, plan_rows, actual_rows, duration_ms,
            planning_ms, client_ms, shared_hit, shared_read, shared_dirtied, shared_written,
            temp_read, temp_written, exact_heap_blocks, lossy_heap_blocks, io_read_ms, collected_at)
        SELECT {run}, t.target_id, 'q' || q.i, NULL, '[]', s.i,
            CASE WHEN {flipped} THEN '{bitmap_fp}' ELSE '{index_fp}' END,
            'explain',
            (1000.0 + 10 * s.i) * CASE WHEN {flipped} THEN
                (CASE WHEN q.i % 200 = 7 THEN 1.005 ELSE 1.2 END) ELSE 1.0 END,
            0.5, 100, 100,
            (1.0 + q.i % 17) * (1 + 0.05 * ((q.i * 7919 + s.i * 104729) % 97) / 97.0)
                * exp(CASE WHEN q.i % 13 = 5 THEN 0.6 ELSE 0.05 END
                    * (random() + random() + random() - 1.5))
                * CASE WHEN t.target_id != {cand} THEN 1.0 WHEN q.i % 20 = 3 THEN 1.3
                    WHEN q.i % 20 = 11 THEN 1.07 WHEN q.i % 40 = 17 THEN 0.7 ELSE 1.0 END,
            0.05, NULL, 100, 0, 0, 0, 0, 0, NULL, NULL, 0.0, now()::TIMESTAMP
        FROM range(?) q(i), range(?) s(i), (VALUES ({base}), ({cand})) t(target_id)
        """,
        [queries, samples],
    )
    con.close()


def target_ids(path: Path) -> tuple[int, int]:
    with Store(path, read_only=True) as store:
        found = {t.name: t.target_id for t in store.targets()}
    return found["base"], found["cand"]


RESIDENT: dict[str, float] = {}  # phase: the most MB resident at the end of one of its calls
PEAKS: dict[str, float] = {}  # phase: the most MB resident seen while it ran (sampled)
RUNNING: list[str] = []  # the phases of the calls under way, innermost last


def rss_mb() -> float:
    """The resident set size now (not the peak), from /proc; 0 where there is none."""
    try:
        return (
            int(Path("/proc/self/statm").read_text().split()[1])
            * os.sysconf("SC_PAGE_SIZE")
            / 2**20
        )
    except OSError:
        return 0.0


@contextmanager
def phase_clock() -> Iterator[tuple[dict[str, float], dict[str, float]]]:
    """Wall and CPU time per phase of the next comparisons, by wrapping the functions of
    PHASE_OF (CPU time is the process's: DuckDB's threads count, another program's load not)."""
    spent: dict[str, float] = defaultdict(float)
    spent_cpu: dict[str, float] = defaultdict(float)
    resident = RESIDENT
    resident.clear()
    stack: list[list[float]] = []  # wall and CPU time inside nested timed calls, per open call

    def timed(phase: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            stack.append([0.0, 0.0])
            RUNNING.append(phase)
            started, used = time.perf_counter(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                RUNNING.pop()
                elapsed = time.perf_counter() - started
                cpu = time.process_time() - used
                nested, nested_cpu = stack.pop()
                spent[phase] += elapsed - nested
                spent_cpu[phase] += cpu - nested_cpu
                resident[phase] = max(resident.get(phase, 0.0), rss_mb())
                if stack:
                    stack[-1][0] += elapsed
                    stack[-1][1] += cpu

        return wrapper

    done = threading.Event()

    def sample() -> None:  # the resident size every 20 ms, filed under the innermost phase
        while not done.wait(0.02):
            phase = RUNNING[-1] if RUNNING else "other"
            PEAKS[phase] = max(PEAKS.get(phase, 0.0), rss_mb())

    PEAKS.clear()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    originals = {key: getattr(*key) for key in PHASE_OF if hasattr(*key)}  # older trees: fewer
    for (owner, name), phase in PHASE_OF.items():
        if (owner, name) not in originals:
            continue
        setattr(owner, name, timed(phase, originals[(owner, name)]))
    try:
        yield spent, spent_cpu
    finally:
        done.set()
        sampler.join()
        for (owner, name), function in originals.items():
            setattr(owner, name, function)


def dump(result: ComparisonResult, out: Path) -> None:
    """Every verdict (with its numbers) and every finding, in a stable order."""
    queries = [
        [
            q.label,
            q.timing.verdict.value,
            q.timing.ratio,
            q.timing.ci_low,
            q.timing.ci_high,
            q.timing.p_value,
            q.timing.q_value,
            q.timing.reason,
            q.timing.paired,
            q.timing.decide_at,
        ]
        for q in result.queries
    ]
    findings = [
        [
            f.code,
            f.severity.value,
            f.query_name,
            f.point,
            f.message,
            json.dumps(f.evidence, sort_keys=True, default=str),
        ]
        for f in result.findings
    ]
    out.write_text(json.dumps({"queries": queries, "findings": findings}, indent=0))


def profile(kind: str, run: Callable[[], ComparisonResult]) -> None:
    if kind == "pyinstrument":
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.005)
        profiler.start()
        run()
        profiler.stop()
        print(profiler.output_text(unicode=False, color=False, show_all=False))
    else:
        import cProfile
        import pstats

        with cProfile.Profile() as prof:
            run()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--store", type=Path, help="build here, or reuse if it exists")
    parser.add_argument("--dump", type=Path, help="write verdicts and findings as JSON")
    parser.add_argument("--profile", choices=("cprofile", "pyinstrument"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.store or Path(tmp) / "bench.duckdb"
        if not path.exists():
            started = time.perf_counter()
            child = multiprocessing.get_context("spawn").Process(
                target=build, args=(path, args.queries, args.samples)
            )
            child.start()
            child.join()
            if child.exitcode:
                raise SystemExit(f"building the store failed ({child.exitcode})")
            print(
                f"built store: {args.queries:,} queries x 2 targets x {args.samples} samples "
                f"in {time.perf_counter() - started:.1f} s ({path.stat().st_size / 1e6:.0f} MB)"
            )
        base_id, cand_id = target_ids(path)
        print(
            f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
            f"({os.cpu_count()} CPUs)"
        )

        def compare() -> ComparisonResult:
            with Store(path, read_only=True) as store:
                targets = {t.target_id: t for t in store.targets()}
                return compare_sides(
                    store, targets[base_id], targets[cand_id], CompareOptions(noise_run=None)
                )

        if args.profile:
            profile(args.profile, compare)
            return
        timings, cpu, phases, phases_cpu = [], [], [], []
        first_peak = 0.0
        result = None
        for run in range(args.repeat):
            result = None  # the previous run's objects are freed before the clock starts
            with phase_clock() as (spent, spent_cpu):
                started, used = time.perf_counter(), time.process_time()
                result = compare()
                timings.append(time.perf_counter() - started)
                cpu.append(time.process_time() - used)
            phases.append(dict(spent))
            phases_cpu.append(dict(spent_cpu))
            if run == 0:
                first_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(
                f"  run {run + 1}: {timings[-1]:.2f} s ({cpu[-1]:.2f} s CPU), "
                f"load {os.getloadavg()[0]:.2f}; "
                + ", ".join(f"{k} {v:.2f}" for k, v in spent.items())
                + "; CPU "
                + ", ".join(f"{k} {v:.2f}" for k, v in spent_cpu.items())
            )
        assert result is not None
        paired = sum(q.timing.paired for q in result.queries)
        assert result.interleaved and paired == len(result.queries), "the paired path was not taken"
        median = statistics.median(timings)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        build_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(
            f"compare: median {median:.2f} s over {args.repeat} runs "
            f"({', '.join(f'{t:.2f}' for t in timings)}), {len(result.queries) / median:,.0f} queries/s; "
            f"CPU time median {statistics.median(cpu):.2f} s"
        )
        names = sorted({k for p in phases for k in p}, key=list(PHASE_OF.values()).index)
        medians = {k: statistics.median(p.get(k, 0.0) for p in phases) for k in names}
        other = median - sum(medians.values())
        print(
            "phases (median s): "
            + ", ".join(f"{k} {v:.2f}" for k, v in medians.items())
            + f", other {other:.2f}"
        )
        cpu_medians = {k: statistics.median(p.get(k, 0.0) for p in phases_cpu) for k in names}
        print(
            "phases CPU (median s): "
            + ", ".join(f"{k} {v:.2f}" for k, v in cpu_medians.items())
            + f", other {statistics.median(cpu) - sum(cpu_medians.values()):.2f}"
        )
        print(
            f"verdicts: {result.verdict_counts()} (paired: {paired:,}); "
            f"findings: {len(result.findings)}"
        )
        print(
            "resident at the end of each phase (last run, MB): "
            + ", ".join(f"{k} {v:,.0f}" for k, v in RESIDENT.items())
        )
        print(
            "most resident during each phase (last run, sampled every 20 ms, MB): "
            + ", ".join(f"{k} {v:,.0f}" for k, v in PEAKS.items())
        )
        print(
            f"peak RSS: {first_peak:,.0f} MB after the first comparison, {peak:,.0f} MB after all "
            f"{args.repeat} (freed memory the allocator keeps raises later runs' base; "
            f"store build, a child process: {build_peak:,.0f} MB)"
        )
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        if args.dump:
            dump(result, args.dump)


if __name__ == "__main__":
    main()
