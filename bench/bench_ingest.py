"""Benchmark of `planshift ingest` on a large auto_explain log (not a test).

    python bench/bench_ingest.py [--size-mb 500] [--small-mb 100]

Builds a stderr log of --size-mb by repeating real auto_explain entries captured from
PostgreSQL 15, 17 and 18 (tests/fixtures/logs: JSON plans, log_analyze on and off, several
queries and plan shapes), with new times, 64 backend pids and the servers' own query ids. Then
measures, each in a fresh process:

- planshift ingest on the small and the large log with its default parallelism (worker
  processes on every core): MB/s, plans/s, peak RSS of the ingest process (flat memory: the
  same peak on both sizes) and CPU time; and the small log in one process (--workers 0);
- the physical limit: orjson.loads over the plans' JSON alone (extracted beforehand), as
  MB of log per second, i.e. what a reader that did nothing but parse JSON would reach;
- pgBadger (Debian's `pgbadger`) on the small log, the very file planshift ingested, with -j 1
  and with -j <cores> (planshift uses every core too), and the ratio to planshift on it;
- ExplainSQL (`cargo install explainsql`) when it can be installed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "logs"))

from capture_logs import PREFIX, plan_entries, replicate  # noqa: E402

SOURCES = ("pg15", "pg17", "pg18", "incident")
MB = 1 << 20


def json_entries() -> list[bytes]:
    """Real auto_explain entries in JSON format from the captured logs."""
    found = []
    for source in SOURCES:
        for entry in plan_entries(ROOT / "tests" / "fixtures" / "logs" / source / "pg.log"):
            if b"  plan:\n\t{" in entry:
                found.append(entry)
    return found


def child_ingest(store: str, log: str, workers: int) -> None:
    """Run in a fresh process: ingest, then print wall time and peak RSS as JSON."""
    from rich.console import Console

    from collectors.logs.autoexplain import IngestOptions
    from detector.jobs.ingest import ingest_logs

    started = time.perf_counter()
    reports = ingest_logs(
        store_path=Path(store),
        files=[Path(log)],
        source="bench",
        options=IngestOptions(log_line_prefix=PREFIX, workers=workers),
        console=Console(file=open(os.devnull, "w")),  # noqa: SIM115
    )
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "wall_s": wall,
                "plans": sum(r.plans for r in reports),
                "problems": sum(r.problem_count for r in reports),
                "rss_mb": peak_rss_mb(usage.ru_maxrss / 1024),
                "cpu_s": usage.ru_utime + usage.ru_stime + descendants_cpu(),
            }
        )
    )


def peak_rss_mb(fallback: float) -> float:
    """This process's peak RSS since it started its program (VmHWM). Not ru_maxrss: exec
    records in it the peak of the image it replaced, and after a vfork (subprocess) that is
    the launching process's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return fallback


def descendants_cpu() -> float:
    """CPU seconds of this process's children and what they reaped (the workers are children
    of multiprocessing's fork server, which reaps them), from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:  # ppid; then utime stime cutime cstime
            total += sum(int(value) for value in fields[11:15]) / tick
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total + children.ru_utime + children.ru_stime


def measure_ingest(log: Path, workdir: Path, workers: int) -> dict[str, Any]:
    store = workdir / f"bench-{log.stem}-{workers}.duckdb"
    store.unlink(missing_ok=True)
    store.with_name(store.name + ".wal").unlink(missing_ok=True)
    command = [sys.executable, __file__, "--child", str(store), str(log), str(workers)]
    result = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    figures: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    size = log.stat().st_size / MB
    figures.update(
        mb=size, mb_s=size / figures["wall_s"], plans_s=figures["plans"] / figures["wall_s"]
    )
    store.unlink(missing_ok=True)
    return figures


def json_limit(log: Path) -> dict[str, float]:
    """orjson over the plan JSON of every entry (extracted first, not timed)."""
    import orjson

    bodies = []
    with log.open("rb") as handle:
        data = handle.read()
    position = 0
    while True:
        start = data.find(b"  plan:\n\t{", position)
        if start < 0:
            break
        body_start = start + len(b"  plan:\n")
        end = data.find(b"\n\t}\n", body_start)
        bodies.append(data[body_start : end + 3])
        position = end + 3
    del data
    started = time.perf_counter()
    for body in bodies:
        orjson.loads(body)
    elapsed = time.perf_counter() - started
    size = log.stat().st_size / MB
    return {"mb_s": size / elapsed, "plans_s": len(bodies) / elapsed, "plans": len(bodies)}


def slice_log(log: Path, out: Path, size_mb: int) -> Path:
    """The first size_mb of the log, cut at an entry boundary."""
    with log.open("rb") as source:
        data = source.read(size_mb * MB)
    cut = data.rfind(b"\n20")
    out.write_bytes(data[: cut + 1])
    return out


def pgbadger(log: Path, workdir: Path, jobs: int) -> dict[str, Any]:
    binary = shutil.which("pgbadger")
    if binary is None:
        return {"error": "pgbadger not installed (apt-get install pgbadger)"}
    output = workdir / "pgbadger.html"
    command = [
        binary,
        "--quiet",
        "-j",
        str(jobs),
        "-f",
        "stderr",
        "--prefix",
        PREFIX,
        "-o",
        str(output),
        str(log),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, timeout=3600, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        return {"error": f"pgbadger failed: {result.stderr.strip()[:200]}"}
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime  # its -j children too
    return {"mb_s": log.stat().st_size / MB / elapsed, "wall_s": elapsed, "cpu_s": cpu}


def explainsql(log: Path) -> dict[str, Any]:
    binary = shutil.which("explainsql") or str(Path.home() / ".cargo" / "bin" / "explainsql")
    if not Path(binary).exists():
        cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
        if not Path(cargo).exists():
            return {"error": "not obtainable: no cargo on this machine"}
        try:
            attempt = subprocess.run(
                [cargo, "install", "explainsql"], capture_output=True, text=True, timeout=300
            )
        except subprocess.TimeoutExpired:
            return {"error": "not obtainable: `cargo install explainsql` timed out"}
        if attempt.returncode != 0:
            reason = (attempt.stderr.strip().splitlines() or ["?"])[-1]
            return {"error": f"not obtainable: `cargo install explainsql` failed ({reason})"}
    started = time.perf_counter()
    result = subprocess.run([binary, str(log)], capture_output=True, timeout=3600, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        return {"error": f"explainsql failed: {result.stderr.decode(errors='replace')[:200]}"}
    return {"mb_s": log.stat().st_size / MB / elapsed, "wall_s": elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--small-mb", type=int, default=100)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="planshift-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    entries = json_entries()
    large, small = workdir / "large.log", workdir / "small.log"
    count = replicate(entries, large, args.size_mb * MB, seed=11)
    slice_log(large, small, args.small_mb)
    print(f"load average before the runs: {os.getloadavg()[0]:.1f} (processes sharing the cores)")
    print(
        f"log: {large.stat().st_size / MB:.0f} MB, {count} auto_explain JSON entries "
        f"(repeating {len(entries)} real ones from PostgreSQL 15/17/18), 64 pids, {os.cpu_count()} cores"
    )
    results: dict[str, Any] = {}
    for name, log in (("small", small), ("large", large)):
        figures = measure_ingest(log, workdir, args.workers)
        results[name] = figures
        print(
            f"planshift ingest {figures['mb']:.0f} MB: {figures['wall_s']:.1f} s, "
            f"{figures['mb_s']:.1f} MB/s, {figures['plans_s']:.0f} plans/s, "
            f"peak RSS {figures['rss_mb']:.0f} MB (writing process), CPU {figures['cpu_s']:.1f} s "
            f"({figures['mb'] / figures['cpu_s']:.1f} MB per CPU second), "
            f"{figures['problems']} problems"
        )
    single = measure_ingest(small, workdir, 0)
    results["small_one_process"] = single
    print(
        f"planshift ingest {single['mb']:.0f} MB, one process: {single['mb_s']:.1f} MB/s, "
        f"{single['plans_s']:.0f} plans/s, peak RSS {single['rss_mb']:.0f} MB"
    )
    limit = json_limit(large)
    results["orjson_limit"] = limit
    print(
        f"physical limit, orjson.loads over the extracted plans only: {limit['mb_s']:.1f} MB/s "
        f"of log, {limit['plans_s']:.0f} plans/s; ingest reaches "
        f"{results['large']['mb_s'] / limit['mb_s']:.0%} of it"
    )
    for jobs in sorted({1, os.cpu_count() or 1}):
        badger = pgbadger(small, workdir, jobs)
        results[f"pgbadger_j{jobs}"] = badger
        if "error" in badger:
            print(f"pgBadger: {badger['error']}")
            break
        print(
            f"pgBadger on the same {args.small_mb} MB log (-j {jobs}): {badger['mb_s']:.1f} MB/s; "
            f"planshift is {results['small']['mb_s'] / badger['mb_s']:.1f}x faster on it"
        )
    explain = explainsql(small)
    results["explainsql"] = explain
    if "error" in explain:
        print(f"ExplainSQL: {explain['error']}")
    else:
        print(
            f"ExplainSQL: {explain['mb_s']:.1f} MB/s; planshift is "
            f"{results['small']['mb_s'] / explain['mb_s']:.1f}x faster"
        )
    growth = results["large"]["rss_mb"] - results["small"]["rss_mb"]
    print(
        f"memory: peak RSS {results['small']['rss_mb']:.0f} MB at {args.small_mb} MB, "
        f"{results['large']['rss_mb']:.0f} MB at {args.size_mb} MB ({growth:+.0f} MB)"
    )
    (workdir / "results.json").write_text(json.dumps(results, indent=2))
    print(f"figures: {workdir / 'results.json'}")
    for path in (large, small):
        path.unlink(missing_ok=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child_ingest(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
