"""Detection rate of paired vs unpaired verdicts, and A/A false alarms, on a busy machine.

    .venv/bin/python bench/bench_detection.py [--runs 2] [--samples 5,10,20,30] [--burners 2]

The "Done when" table of issue 12, measured on real PostgreSQL 15 (an embedded cluster) through
planshift's runner, with `--burners` CPU busy loops running beside it (killed at the end, also on
Ctrl-C or SIGTERM; each one also exits by itself when this process dies). It prints; it asserts
nothing.

What one run holds (`--runs` runs per sample size, each a fresh parameter seed):

* `--aa` A/A queries: both variants identical. Two thirds vary their parameters per sample
  (range start and length, 300 to 30,000 rows), one third are fixed (300, 3,000 or 30,000 rows).
* for each injected slowdown (1.1x, 1.2x, 1.3x), `--slowed` queries with varied parameters,
  slower on variant b.

Every query is its own comparison. The paired verdicts are what `compare_sides` says (paired
statistics, since both sides come from one interleaved run, with Benjamini-Hochberg across all
the queries of the run); the unpaired verdicts come from `stats.compare_timings_batch` on the same
durations, with the same minimum-delta rule and the same BH step, so the columns differ only in
the method. Because BH is lenient when many queries really changed (here most of a run), a third
column asks the harder question a CI gate faces: each slowed query's paired verdict with BH over
it and the run's A/A queries only (one regression among `--aa` unchanged queries).

How the slowdown is injected (honestly, without pg_sleep). Every query of the run has the same
shape: `sum(k)` over an index range of LEN rows, plus a scalar subquery (an InitPlan, run once)
that sums a second index range of `f * (LEN + L0)` rows of the same table, where `f` is a custom
GUC set by the variant (0 on variant a, and on both variants of an A/A query). So variant b does
the same kind of work as the query itself (index scan, same hot pages), in proportion to it: the
slowdown is multiplicative per sample, whatever the range length. L0 is the query's fixed cost
expressed in rows; L0 and `f` per target slowdown come from a calibration run (the median
per-sample ratio b/a at the shortest and at the longest range, with a known f); after each run,
`f` is corrected from the ratios that run realized (the median of the estimates so far), since
the cost of the extra rows under load drifts from run to run. The realized
slowdown is measured and printed beside each nominal one: the median of all per-sample ratios
b/a of that slowdown's queries, per sample size (pooled over its runs) and overall.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from collectors.runner import RunOptions, run_workload  # noqa: E402
from collectors.servers.targets import Server, open_servers, resolve_target_specs  # noqa: E402
from detector.engine import false_discoveries, stats, stats_paired  # noqa: E402
from detector.engine.comparison.compare import (  # noqa: E402
    CompareOptions,
    aligned,
    below_min_delta,
    compare_sides,
    resolve_side,
)
from detector.engine.comparison.query_pairs import SidePair  # noqa: E402
from detector.jobs.workload import load_workload  # noqa: E402
from detector.model import ComparisonResult, QueryComparison, TimingComparison, Verdict  # noqa: E402
from detector.model.workload import Workload  # noqa: E402
from detector.store import Store  # noqa: E402

ROWS = 200_000
LEN_RANGE = (300, 30_000)
FIXED_LENGTHS = (300, 3_000, 30_000)
CALIBRATION_F = 0.25
FLAGGED = (Verdict.REGRESSED, Verdict.IMPROVED)
BURN = (
    "import os\n"
    "parent = os.getppid()\n"
    "while os.getppid() == parent:\n"
    "    for _ in range(200000):\n"
    "        pass\n"
)
SQL = (
    "SELECT sum(k) + (SELECT coalesce(sum(k), 0) FROM bench_t WHERE id BETWEEN %(start)s AND "
    "%(start)s + (current_setting('bench.{group}')::float8 * (%(len)s + "
    "current_setting('bench.l0')::float8))::int - 1) "
    "FROM bench_t WHERE id BETWEEN %(start)s AND %(start)s + %(len)s - 1"
)
SETUP = f"""
SELECT setseed(0.12);
DROP TABLE IF EXISTS bench_t;
CREATE TABLE bench_t (id int PRIMARY KEY, k int NOT NULL, pad text NOT NULL);
INSERT INTO bench_t SELECT i, (random() * 1000000)::int, md5(i::text)
FROM generate_series(1, {ROWS}) AS i;
VACUUM ANALYZE bench_t;
"""


def log(message: str) -> None:
    one = os.getloadavg()[0]
    print(f"[{time.strftime('%H:%M:%S')} load {one:.2f}] {message}", file=sys.stderr, flush=True)


@contextmanager
def burners(count: int) -> Iterator[None]:
    """`count` CPU busy loops for the duration of the block, always killed at its end."""
    procs: list[subprocess.Popen[bytes]] = []

    def terminate(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)  # unwinds through the finally blocks below

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        procs.extend(subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(count))
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()
        signal.signal(signal.SIGTERM, previous)


def group_guc(group: str) -> str:
    return "bench." + group


def workload_toml(
    groups: dict[str, int], aa: int, seed: int, repetitions: int, calibration: bool = False
) -> str:
    """The run's workload: `aa` A/A queries and `groups[g]` varied queries per slowed group
    (for `calibration`, the group's queries alternate between the shortest and longest range)."""
    start_max = ROWS - LEN_RANGE[1] * 2
    varied = f"{{ start = {{ range = [1, {start_max}] }}, len = {{ range = {list(LEN_RANGE)} }} }}"
    lines = [
        "[workload]",
        'name = "bench-detection"',
        f"repetitions = {repetitions}",
        "warmup = 3",
        f"seed = {seed}",
        "[[targets]]",
        'name = "pg15"',
        'postgres = "15"',
        'settings = { shared_buffers = "128MB" }',
        "[setup]",
        f'sql = """{SETUP}"""',
    ]

    def query(name: str, group: str, params: str) -> None:
        sql = SQL.format(group=group).replace('"', '\\"')
        lines.extend(["[[queries]]", f'name = "{name}"', f'sql = "{sql}"', f"params = {params}"])

    n_fixed = aa // 3
    for i in range(aa - n_fixed):
        query(f"aa_varied_{i:02d}", "aa", varied)
    for i in range(n_fixed):
        length = FIXED_LENGTHS[i % len(FIXED_LENGTHS)]
        query(f"aa_fixed{length}_{i:02d}", "aa", f"{{ start = {1000 + 4000 * i}, len = {length} }}")
    for group, count in groups.items():
        for i in range(count):
            if calibration:
                length = LEN_RANGE[i % 2]
                fixed = f"{{ start = {{ range = [1, {start_max}] }}, len = {length} }}"
                query(f"{group}{length}_{i:02d}", group, fixed)
            else:
                query(f"{group}_{i:02d}", group, varied)
    return "\n".join(lines) + "\n"


def variants(groups: dict[str, float], l0: float) -> dict[str, dict[str, str]]:
    """Variant a does no extra work; b does f * (LEN + L0) extra rows per group."""
    base = {group_guc("aa"): "0", group_guc("l0"): f"{l0:.1f}"}
    return {
        "a": {**base, **{group_guc(g): "0" for g in groups}},
        "b": {**base, **{group_guc(g): f"{f:.5f}" for g, f in groups.items()}},
    }


@dataclass
class Bench:
    servers: list[Server]
    store: Store
    tmp: Path
    runs_done: int = 0
    loads: list[float] | None = None

    def run(
        self,
        groups: dict[str, int],
        fs: dict[str, float],
        l0: float,
        aa: int,
        n: int,
        seed: int,
        calibration: bool = False,
    ) -> tuple[ComparisonResult, int]:
        path = self.tmp / f"workload_{seed}.toml"
        path.write_text(workload_toml(groups, aa, seed, n, calibration))
        workload: Workload = load_workload(path)
        workload = replace(
            workload,
            variants=variants(fs, l0),
            setup=workload.setup if self.runs_done == 0 else (),
        )
        run_id = run_workload(workload, self.servers, self.store, RunOptions(repetitions=n))
        self.runs_done += 1
        if self.loads is not None:
            self.loads.append(os.getloadavg()[0])
        base = resolve_side(self.store, "a", run_id)
        cand = resolve_side(self.store, "b", run_id)
        return compare_sides(self.store, base, cand, CompareOptions(noise_run=None)), run_id

    def samples(self, run_id: int) -> dict[str, list[tuple[int, float, float]]]:
        """Per query name: (LEN, a ms, b ms) per sample index."""
        names = {key: q.name for key, q in self.store.queries().items()}
        targets = {t.name: t.target_id for t in self.store.targets([run_id])}
        by: dict[tuple[str, int], dict[str, tuple[int, float]]] = defaultdict(dict)
        for row in self.store.observations([targets["a"], targets["b"]]):
            side = "a" if row.target_id == targets["a"] else "b"
            length = int(json.loads(row.params)["len"])
            by[(names[row.query_key], row.sample_index)][side] = (length, row.duration_ms or 0.0)
        out: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
        for (name, _), sides in sorted(by.items()):
            if len(sides) == 2:
                out[name].append((sides["a"][0], sides["a"][1], sides["b"][1]))
        return out


def calibrate(bench: Bench, queries: int, n: int) -> tuple[float, float]:
    """(L0: a's fixed cost in rows, cost of an extra row / a base row) from one run whose
    queries scan the shortest or the longest range, from the median per-sample ratios."""
    log(f"calibration run: {queries} queries x {n} samples, f = {CALIBRATION_F}")
    _, run_id = bench.run(
        {"cal": queries}, {"cal": CALIBRATION_F}, 0.0, 0, n, seed=999, calibration=True
    )
    by_length: dict[int, list[tuple[int, float, float]]] = defaultdict(list)
    for name, rows in bench.samples(run_id).items():
        if name.startswith("cal"):
            for row in rows:
                by_length[row[0]].append(row)
    # per-sample ratios b/a cancel the load, as the paired verdicts do: at length L the median
    # ratio is 1 + u * L / (L + L0), with u = f * (cost of an extra row / cost of a base row)
    (lo, r_lo), (hi, r_hi) = (
        (length, float(np.median([b / a for _, a, b in by_length[length] if a > 0])) - 1)
        for length in LEN_RANGE
    )
    slope_lo, slope_hi = r_lo / lo, r_hi / hi
    l0 = (r_lo - r_hi) / (slope_hi - slope_lo) if slope_hi != slope_lo else 0.0
    l0 = min(max(l0, 0.0), float(hi))
    extra = r_hi * (hi + l0) / hi / CALIBRATION_F
    log(
        f"  median ratio {1 + r_lo:.3f} at {lo} rows, {1 + r_hi:.3f} at {hi} rows: L0 = {l0:.0f} "
        f"rows, an extra row costs {extra:.2f}x a base row"
    )
    return l0, extra


def pair_of(q: QueryComparison) -> SidePair:
    return SidePair(q.query_key, q.query_name, q.sql, q.point, q.baseline, q.candidate)


def unpaired(result: ComparisonResult) -> dict[str, Verdict]:
    """Two-sample verdicts on the same durations, with the min-delta rule and BH as compare_sides."""
    timed = [q for q in result.queries if q.baseline.durations_ms and q.candidate.durations_ms]
    verdicts = stats.compare_timings_batch(
        [(q.baseline.durations_ms, q.candidate.durations_ms) for q in timed]
    )
    opts = CompareOptions()
    checked = [
        below_min_delta(pair_of(q), v, opts.min_delta_ms)
        for q, v in zip(timed, verdicts, strict=True)
    ]
    final = false_discoveries.control_false_discoveries(checked, opts.alpha)
    return {q.query_name: v.verdict for q, v in zip(timed, final, strict=True)}


def alone(result: ComparisonResult) -> dict[str, Verdict]:
    """Each slowed query's paired verdict with BH over it and the run's A/A queries only."""
    opts = CompareOptions()

    def paired(q: QueryComparison) -> TimingComparison:
        (verdict,) = stats_paired.compare_paired_batch([aligned(pair_of(q))])
        return below_min_delta(pair_of(q), verdict, opts.min_delta_ms)

    aa = [paired(q) for q in result.queries if q.query_name.startswith("aa_")]
    return {
        q.query_name: false_discoveries.control_false_discoveries([paired(q), *aa], opts.alpha)[
            0
        ].verdict
        for q in result.queries
        if not q.query_name.startswith("aa_")
    }


def describe(q: QueryComparison) -> str:
    t, base = q.timing, q.baseline.timing
    median = f"a median {base.median_ms:.3f} ms, " if base else ""
    return f"{median}{t.describe()} p={t.p_value or 0:.2g} q={t.q_value or 0:.2g}"


def rate(hits: int, total: int) -> str:
    return f"{hits}/{total} {100 * hits / total:3.0f}%" if total else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="runs per sample size")
    parser.add_argument("--samples", default="5,10,20,30", help="samples per side")
    parser.add_argument("--slowdowns", default="1.1,1.2,1.3")
    parser.add_argument(
        "--slowed", type=int, default=12, help="slowed queries per slowdown per run"
    )
    parser.add_argument("--aa", type=int, default=27, help="A/A queries per run")
    parser.add_argument("--burners", type=int, default=2, help="CPU busy loops beside the bench")
    parser.add_argument("--calibration-samples", type=int, default=10)
    parser.add_argument("--save", type=Path, help="write every run's (LEN, a ms, b ms) here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.samples.split(",")]
    slowdowns = [float(s) for s in args.slowdowns.split(",")]
    groups = {f"x{s:g}".replace(".", "_"): s for s in slowdowns}
    load_before = os.getloadavg()
    started = time.perf_counter()
    detected: dict[tuple[str, int, str], int] = Counter()
    total: dict[tuple[str, int], int] = Counter()
    aa_flags: dict[tuple[int, str, str], int] = Counter()  # (n, kind, method)
    aa_total: dict[tuple[int, str], int] = Counter()
    aa_verdicts: Counter[str] = Counter()
    alarms: list[str] = []
    realized: dict[tuple[str, int], list[float]] = defaultdict(list)
    plans: set[str] = set()
    saved: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp, burners(args.burners):
        os.chmod(tmp, 0o755)
        log(f"{args.burners} CPU burners started; starting PostgreSQL 15")
        spec_source = Path(tmp) / "targets.toml"
        spec_source.write_text(workload_toml({}, 1, 0, 1))
        specs = resolve_target_specs(load_workload(spec_source).targets, [], {})
        with Store(Path(tmp) / "bench.duckdb") as store, open_servers(specs) as servers:
            bench = Bench(servers, store, Path(tmp))
            l0, extra_cost = calibrate(bench, 16, args.calibration_samples)
            costs = [extra_cost]  # estimates of (cost of an extra row / a base row)
            fs = {g: (s - 1) / extra_cost for g, s in groups.items()}
            bench.loads = []
            plan_runs = [(n, r) for n in sizes for r in range(args.runs)]
            for i, (n, r) in enumerate(plan_runs):
                t0 = time.perf_counter()
                counts = dict.fromkeys(groups, args.slowed)
                result, run_id = bench.run(counts, fs, l0, args.aa, n, seed=1000 * n + r)
                other = unpaired(result)
                single = alone(result)
                for q in result.queries:
                    name = q.query_name
                    plans.update(
                        p.signature for side in (q.baseline, q.candidate) for p in side.plans
                    )
                    if name.startswith("aa_"):
                        kind = "varied" if name.startswith("aa_varied") else "fixed"
                        aa_total[(n, kind)] += 1
                        aa_verdicts[q.timing.verdict.value] += 1
                        aa_flags[(n, kind, "paired")] += q.timing.verdict in FLAGGED
                        if q.timing.verdict in FLAGGED:
                            alarms.append(f"n={n} {name}: {q.timing.verdict.value} {describe(q)}")
                        aa_flags[(n, kind, "unpaired")] += other[name] in FLAGGED
                        continue
                    group = name.rsplit("_", 1)[0]
                    total[(group, n)] += 1
                    detected[(group, n, "paired")] += q.timing.verdict is Verdict.REGRESSED
                    detected[(group, n, "unpaired")] += other[name] is Verdict.REGRESSED
                    detected[(group, n, "alone")] += single[name] is Verdict.REGRESSED
                ratios: dict[str, list[float]] = defaultdict(list)
                measured = bench.samples(run_id)
                saved.append({"n": n, "run": r, "load": os.getloadavg()[0], "queries": measured})
                for name, rows in measured.items():
                    if not name.startswith("aa_"):
                        ratios[name.rsplit("_", 1)[0]].extend(b / a for _, a, b in rows if a > 0)
                for g, values in ratios.items():
                    realized[(g, n)].extend(values)
                    costs.append((float(np.median(values)) - 1) / fs[g])
                cost = float(np.median(costs))
                fs = {g: (s - 1) / cost for g, s in groups.items()}
                log(
                    f"run {i + 1}/{len(plan_runs)}: n={n} in {time.perf_counter() - t0:.0f} s; "
                    f"extra-row cost {cost:.2f}"
                )
    load_after = os.getloadavg()
    if args.save:
        args.save.write_text(json.dumps(saved))
    loads = bench.loads or [float("nan")]
    minutes = (time.perf_counter() - started) / 60
    n_aa = sum(aa_total.values())
    queries_per_run = args.aa + args.slowed * len(groups)
    print(
        f"planshift detection bench: embedded PostgreSQL 15, {os.cpu_count()} CPUs, "
        f"{args.burners} CPU burners beside it, {minutes:.1f} min"
    )
    print(
        f"load average (1/5/15 min): before {'/'.join(f'{x:.2f}' for x in load_before)}; "
        f"1-min after each run min {min(loads):.2f} / median {float(np.median(loads)):.2f} / "
        f"max {max(loads):.2f}; at the end {'/'.join(f'{x:.2f}' for x in load_after)}"
    )
    print(
        f"{args.runs} runs per sample size; a run = {args.aa} A/A queries + {len(groups)} x "
        f"{args.slowed} slowed queries ({queries_per_run} comparisons), range lengths "
        f"{LEN_RANGE[0]}-{LEN_RANGE[1]} rows; slowdown = extra rows f*(LEN+{l0:.0f}) on b"
    )
    print(f"plans seen: {', '.join(sorted(plans))}")
    print()
    print("Detection rate (verdict `regressed`) per query comparison")
    print(
        "  paired   = compare_sides (biweight location of the per-sample log ratios, its "
        f"biweight t test and CI; BH across the {queries_per_run} queries of the run)"
    )
    print(
        "  unpaired = stats.compare_timings_batch on the same durations (ratio of medians, "
        "bootstrap, Mann-Whitney; same min-delta rule and BH)"
    )
    print(
        f"  alone    = paired, BH over the query and the run's {args.aa} A/A queries only "
        "(one regression among unchanged queries)"
    )
    header = f"{'slowdown':>9} {'realized':>8} {'method':>9} " + "".join(
        f"{f'n={n}':>14}" for n in sizes
    )
    print(header)
    for group, nominal in groups.items():
        pooled = [r for n in sizes for r in realized[(group, n)]]
        ratio = float(np.median(pooled)) if pooled else float("nan")
        for j, method in enumerate(("paired", "unpaired", "alone")):
            lead = f"{nominal:>8.1f}x {ratio:>7.3f}x" if j == 0 else " " * 18
            cells = "".join(
                f"{rate(detected[(group, n, method)], total[(group, n)]):>14}" for n in sizes
            )
            print(f"{lead} {method:>9} {cells}")
        cells = "".join(
            f"{float(np.median(realized[(group, n)])) if realized[(group, n)] else 0:>13.3f}x"
            for n in sizes
        )
        print(f"{'':18} {'realized':>9} {cells}")
    print()
    print(
        f"A/A false alarms (verdict `regressed` or `improved`), {n_aa} comparisons "
        "(same runs as above, so BH sees the slowed queries too)"
    )
    print(
        f"{'kind':>9} {'method':>9} " + "".join(f"{f'n={n}':>14}" for n in sizes) + f"{'all':>14}"
    )
    for kind in ("varied", "fixed"):
        for method in ("paired", "unpaired"):
            cells = "".join(
                f"{rate(aa_flags[(n, kind, method)], aa_total[(n, kind)]):>14}" for n in sizes
            )
            hits = sum(aa_flags[(n, kind, method)] for n in sizes)
            all_cell = rate(hits, sum(aa_total[(n, kind)] for n in sizes))
            print(f"{kind:>9} {method:>9} {cells}{all_cell:>14}")
    print(f"paired A/A verdicts: {dict(sorted(aa_verdicts.items()))}")
    for alarm in alarms:
        print(f"  paired A/A false alarm: {alarm}")
    print()
    print(
        f"BH lets a lone regression among m queries through at p < 0.05/m "
        f"({0.05 / (args.aa + 1):.2g} for the 'alone' column) unless other queries have small "
        "p-values too (BH's step-up)"
    )
    print()
    print("Targets (issue 12)")
    for nominal, n in ((1.3, 10), (1.2, 20)):
        group = f"x{nominal:g}".replace(".", "_")
        if group in groups and n in sizes:
            for method in ("paired", "alone"):
                hits, count = detected[(group, n, method)], total[(group, n)]
                met = "met" if count and hits >= 0.95 * count else "MISSED"
                print(
                    f"  {nominal}x detected >= 95% at {n} samples ({method}): "
                    f"{rate(hits, count)} {met}"
                )
    flags = sum(aa_flags[(n, k, "paired")] for n in sizes for k in ("varied", "fixed"))
    met = "met" if flags == 0 and n_aa >= 200 else "MISSED"
    print(f"  0 A/A false alarms in >= 200 comparisons (paired): {flags} in {n_aa} {met}")


if __name__ == "__main__":
    main()
