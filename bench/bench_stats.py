"""Throughput of compare_timings_batch: 100,000 queries x 2 sides x 10 samples.

Run: .venv/bin/python bench/bench_stats.py [--queries N] [--samples N] [--repeat N]

Inputs are lists of Python floats (what the store hands over), lognormal latencies around
2 ms; a tenth of the queries are 30% slower on the candidate side. The call is timed
--repeat times and the median quoted; one more call runs under tracemalloc (which also sees
numpy's buffers) for the peak allocation, and the process's max RSS (getrusage) is printed.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from detector.engine.stats import compare_timings_batch


def make_pairs(queries: int, samples: int, seed: int) -> list[tuple[list[float], list[float]]]:
    rng = np.random.default_rng(seed)
    base = 2.0 * np.exp(rng.normal(0.0, 0.2, (queries, samples)))
    shift = np.where(np.arange(queries) % 10 == 0, 1.3, 1.0)[:, None]
    cand = 2.0 * shift * np.exp(rng.normal(0.0, 0.2, (queries, samples)))
    return list(zip(base.tolist(), cand.tolist(), strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=2000)
    args = parser.parse_args()
    pairs = make_pairs(args.queries, args.samples, seed=42)
    print(
        f"compare_timings_batch: {args.queries:,} queries x 2 sides x {args.samples} samples, "
        f"{args.resamples} bootstrap resamples"
    )
    seconds = []
    for run in range(1, args.repeat + 1):
        start = time.perf_counter()
        results = compare_timings_batch(pairs, resamples=args.resamples)
        seconds.append(time.perf_counter() - start)
        print(f"  run {run}: {seconds[-1]:6.2f} s  {args.queries / seconds[-1]:9,.0f} pairs/s")
    shifted = [r.verdict.value for i, r in enumerate(results) if i % 10 == 0]
    same = [r.verdict.value for i, r in enumerate(results) if i % 10]
    for label, verdicts in (("A/A queries", same), ("+30% queries", shifted)):
        print(f"  {label} ({len(verdicts):,}): {dict(sorted(Counter(verdicts).items()))}")
    tracemalloc.start()  # a separate run: tracing slows every allocation down
    compare_timings_batch(pairs, resamples=args.resamples)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    median = statistics.median(seconds)
    maxrss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"median of {args.repeat}: {median:.2f} s, {args.queries / median:,.0f} pairs/s; "
        f"peak allocated during a call {peak / 2**20:.0f} MiB (tracemalloc), "
        f"process max RSS {maxrss_mib:.0f} MiB (inputs included)"
    )


if __name__ == "__main__":
    main()
