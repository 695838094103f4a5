"""False alarms and sensitivity of the default verdicts, measured on real PostgreSQL.

    .venv/bin/python bench/bench_false_alarms.py [--aa 20] [--runs-per-step 5] [--repetitions 100]

1. A/A: the demo workload (examples/demo) with its `current` variant run twice, interleaved,
   `--aa` times on one embedded PostgreSQL 15; each run is compared side against side with the
   default settings. Every `regressed` verdict is a false alarm.
2. Sensitivity: the candidate side adds CPU work inside the statement (counting
   `generate_series(1, current_setting('planshift.work'))`, a custom GUC set by the variant),
   so the plan is the same on both sides and only the amount of work differs; for each amount,
   the measured median ratio and the share of runs whose verdict is `regressed` (detection
   rate) are printed. (pg_sleep is useless here: it oversleeps by ~1 ms.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from collectors.runner import RunOptions, run_workload  # noqa: E402
from collectors.servers.targets import open_servers, resolve_target_specs  # noqa: E402
from detector.engine.comparison.compare import compare_sides, resolve_side  # noqa: E402
from detector.engine.comparison.options import CompareOptions  # noqa: E402
from detector.jobs.workload import load_workload  # noqa: E402
from detector.model import Verdict  # noqa: E402
from detector.model.workload import Query  # noqa: E402
from detector.store import Store  # noqa: E402

EXTRA_WORK = Query(
    name="sum_range_extra_work",
    sql=(
        "SELECT SUM(k), (SELECT count(*) FROM generate_series(1, "
        "current_setting('planshift.work')::int)) "
        "FROM sbtest1 WHERE id BETWEEN %(start)s AND %(start)s + 7999"
    ),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aa", type=int, default=20)
    parser.add_argument("--runs-per-step", type=int, default=5)
    parser.add_argument("--repetitions", type=int, default=100)
    parser.add_argument("--work", default="1000,2000,3000,4000,6000,8000")
    args = parser.parse_args()
    workload = load_workload(ROOT / "examples" / "demo" / "workload.toml")
    gucs = dict(workload.variants["current"])
    start_param = workload.query("sum_range").params
    extra_work = replace(EXTRA_WORK, params=start_param)
    options = RunOptions(repetitions=args.repetitions)
    with tempfile.TemporaryDirectory() as tmp:
        specs = resolve_target_specs(workload.targets, [], {})
        with Store(Path(tmp) / "fa.duckdb") as store, open_servers(specs) as servers:

            def measure(
                variants: dict[str, dict[str, str]], queries: tuple[Query, ...], first: bool
            ) -> list[Verdict]:
                run_workload(
                    replace(
                        workload,
                        variants=variants,
                        queries=queries,
                        setup=workload.setup if first else (),
                    ),
                    servers,
                    store,
                    options,
                )
                run_id = store.latest_run_id()
                base = resolve_side(store, "a", run_id)
                cand = resolve_side(store, "b", run_id)
                result = compare_sides(store, base, cand, CompareOptions(noise_run=None))
                return [q.timing.verdict for q in result.queries]

            started = time.perf_counter()
            aa_variants = {
                "a": {**gucs, "planshift.work": "0"},
                "b": {**gucs, "planshift.work": "0"},
            }
            queries = (*workload.queries, replace(extra_work))
            counts: dict[str, int] = {v.value: 0 for v in Verdict}
            for index in range(args.aa):
                for verdict in measure(aa_variants, queries, index == 0):
                    counts[verdict.value] += 1
            comparisons = args.aa * len(queries)
            print(
                f"A/A: {args.aa} runs x {len(queries)} queries = {comparisons} query comparisons "
                f"({args.repetitions} samples per side) in {time.perf_counter() - started:.0f} s"
            )
            print(
                f"  verdicts: {counts}; false-alarm rate (regressed): "
                f"{counts['regressed']}/{comparisons} = {counts['regressed'] / comparisons:.1%}"
            )

            base_ms: list[float] = []
            for work in (int(w) for w in args.work.split(",")):
                variants = {
                    "a": {**gucs, "planshift.work": "0"},
                    "b": {**gucs, "planshift.work": str(work)},
                }
                detected = 0
                ratios = []
                for _ in range(args.runs_per_step):
                    run_workload(
                        replace(workload, variants=variants, queries=(extra_work,), setup=()),
                        servers,
                        store,
                        options,
                    )
                    run_id = store.latest_run_id()
                    result = compare_sides(
                        store,
                        resolve_side(store, "a", run_id),
                        resolve_side(store, "b", run_id),
                        CompareOptions(noise_run=None),
                    )
                    (query,) = result.queries
                    detected += query.timing.verdict is Verdict.REGRESSED
                    ratios.append(query.timing.ratio or 0.0)
                    if query.baseline.timing:
                        base_ms.append(query.baseline.timing.median_ms)
                print(
                    f"  +{work} rows of work on a {statistics.median(base_ms):.2f} ms query "
                    f"(median ratio {statistics.median(ratios):.3f}x): detected "
                    f"{detected}/{args.runs_per_step}"
                )


if __name__ == "__main__":
    main()
