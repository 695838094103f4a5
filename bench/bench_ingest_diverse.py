"""Benchmark of `planshift ingest` against pgBadger on a diverse real log (not a test).

    python bench/bench_ingest_diverse.py [--sizes 100 400] [--format json|text] [--repeat 3]

The log comes from a real PostgreSQL 15 cluster (`diverse_log.capture_log`: auto_explain on
every statement with log_analyze, buffers and JSON or text plans; three sessions of varied SQL
over TPC-H-like, partitioned and pgbench tables, pgbench with prepared and simple protocol,
sysbench oltp_read_write): a --real-mb MB capture (by default the largest size: 400 MB, ~85,000
entries, ~35,000 distinct query texts, hundreds of plan shapes), cached in --cache so reruns
skip it (capturing takes a few minutes). Each benchmark size is the first MB of that log, cut
at an entry boundary; a size above --real-mb concatenates copies of it, times shifted and pids
offset per copy (`diverse_log.build_log`).

On EXACTLY the same file per size, in one run, each in a fresh process: planshift ingest with
its default parallelism (workers on every core) and with --workers 0; pgBadger -j 1 and -j 2
(`-f stderr`, the log's prefix, HTML to a temp file). Printed: MB/s and plans/s (medians of
--repeat runs), planshift's ratio to pgBadger -j 2, peak RSS of the ingest process at each size
(flat memory: about the same at both), CPU seconds (workers included; pgBadger's with its -j
children) and MB per CPU-second, which depends less on what else runs on the machine than MB/s,
and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_ingest import measure_ingest, pgbadger  # noqa: E402
from diverse_log import MB, build_log, capture_log  # noqa: E402


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k, v in runs[0].items() if isinstance(v, (int, float))]
    figures = {k: statistics.median(r[k] for r in runs) for k in keys}
    figures["runs"] = [round(r["mb_s"], 1) for r in runs if "mb_s" in r]
    return figures


def load() -> str:
    return "load {:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())


def distinct(log: Path) -> tuple[int, int]:
    """auto_explain entries and distinct query texts of the real log."""
    data = log.read_bytes()
    texts = set()
    for marker in (b'"Query Text": ', b"Query Text: "):
        position = data.find(marker)
        while position >= 0:
            end = data.find(b"\n", position)
            texts.add(data[position:end])
            position = data.find(marker, end)
    return data.count(b"  plan:\n"), len(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 400])
    parser.add_argument("--format", choices=("json", "text"), default="json")
    parser.add_argument("--real-mb", type=int, default=None, help="default: the largest size")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "planshift-bench-cache"
    )
    parser.add_argument("--no-pgbadger", action="store_true")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    real = capture_log(args.cache, args.format, args.real_mb or max(args.sizes))
    entries, texts = distinct(real)
    print(
        f"real log: {real} ({real.stat().st_size / MB:.0f} MB, {entries} auto_explain "
        f"{args.format} entries, {texts} distinct query texts), {os.cpu_count()} cores, {load()}"
    )
    workdir = Path(tempfile.mkdtemp(prefix="planshift-bench-"))
    results: dict[str, Any] = {}
    for size in args.sizes:
        log = build_log(real, args.cache / f"diverse-{args.format}-x{size}mb.log", size)
        figures: dict[str, Any] = {}
        for name, workers in (("planshift", args.workers), ("planshift_w0", 0)):
            runs = [measure_ingest(log, workdir, workers) for _ in range(args.repeat)]
            figures[name] = median_of(runs)
            found = figures[name]
            print(
                f"{size} MB  planshift --workers {workers}: {found['mb_s']:.1f} MB/s "
                f"(runs {found['runs']}), {found['plans_s']:.0f} plans/s, peak RSS "
                f"{found['rss_mb']:.0f} MB, CPU {found['cpu_s']:.1f} s, "
                f"{found['problems']:.0f} problems, {load()}"
            )
        for jobs in () if args.no_pgbadger else (1, 2):
            runs = [pgbadger(log, workdir, jobs) for _ in range(max(1, args.repeat - 1))]
            if any("error" in r for r in runs):
                print(f"pgBadger: {runs[0].get('error')}")
                break
            badger = figures[f"pgbadger_j{jobs}"] = median_of(runs)
            print(
                f"{size} MB  pgBadger -j {jobs}: {badger['mb_s']:.1f} MB/s (runs {badger['runs']}), "
                f"CPU {badger['cpu_s']:.1f} s, {load()}"
            )
        if "pgbadger_j2" in figures:
            ratio = figures["planshift"]["mb_s"] / figures["pgbadger_j2"]["mb_s"]
            figures["ratio_j2"] = ratio
            best = max(figures["planshift"]["mb_s"], figures["planshift_w0"]["mb_s"])
            per_cpu = [size / figures[k]["cpu_s"] for k in ("planshift", "pgbadger_j2")]
            figures["ratio_cpu_j2"] = per_cpu[0] / per_cpu[1]
            print(
                f"{size} MB  planshift / pgBadger -j 2 on the same file: {ratio:.1f}x "
                f"(best planshift mode {best / figures['pgbadger_j2']['mb_s']:.1f}x); per "
                f"CPU-second {per_cpu[0]:.0f} vs {per_cpu[1]:.1f} MB ({per_cpu[0] / per_cpu[1]:.1f}x)"
            )
        results[str(size)] = figures
    rss = [results[str(s)]["planshift"]["rss_mb"] for s in args.sizes]
    print(
        "peak RSS by size: "
        + ", ".join(f"{s} MB -> {r:.0f} MB" for s, r in zip(args.sizes, rss, strict=True))
    )
    (workdir / "results.json").write_text(json.dumps(results, indent=2))
    print(f"figures: {workdir / 'results.json'}")


if __name__ == "__main__":
    main()
