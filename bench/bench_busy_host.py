"""The demo's verdicts on a busy host: does the headline hold, and does the report say so?

    .venv/bin/python bench/bench_busy_host.py [--runs 5] [--burners 2] [--repetitions 100]
        [--workload examples/demo/workload.toml] [--store FILE]

Runs the workload `--runs` times with `--burners` CPU-bound processes beside each run (started
before it, killed after it), compares each run's two sides as `planshift compare` does, and
prints per run: the host's load, CPU pressure and busy verdict as recorded, and per query the
timing verdict, its ratio and interval, and whether PS203 put the verdict at risk. Figures are
printed with the load average, never asserted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from detector.engine.comparison.options import CompareOptions  # noqa: E402
from detector.jobs.compare import compare_from_store  # noqa: E402
from detector.model import Verdict  # noqa: E402


def run_once(workload: Path, store: Path, burners: int, repetitions: int) -> int:
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burners)]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "detector", "run", str(workload), "--store", str(store),
             "--repetitions", str(repetitions)],
            capture_output=True, text=True, check=True, env={**os.environ, "PYTHONSAFEPATH": "1"},
        )  # fmt: skip
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()
    return int(done.stdout.split("run ")[1].split()[0])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--burners", type=int, default=2)
    parser.add_argument("--repetitions", type=int, default=100)
    parser.add_argument("--workload", type=Path, default=ROOT / "examples/demo/workload.toml")
    parser.add_argument("--store", type=Path)
    args = parser.parse_args(argv)
    store = args.store or Path(tempfile.mkdtemp(prefix="bench-busy-")) / "busy.duckdb"
    print(f"{args.runs} runs of {args.workload.name}, {args.burners} CPU burners beside each")
    for _ in range(args.runs):
        before = os.getloadavg()[0]
        run_id = run_once(args.workload, store, args.burners, args.repetitions)
        result = compare_from_store(store, None, None, run_id, CompareOptions(noise_run=None))
        host = (result.conditions.get("baseline") or {}).get("host") or {}
        pressure = (host.get("pressure") or {}).get("cpu_some")
        print(
            f"\nrun {run_id}: load {before:.1f} before, {host.get('load', {}).get('mean_1min')} "
            f"while measuring ({host.get('load', {}).get('per_cpu')} per CPU), CPU pressure "
            f"{'n/a' if pressure is None else f'{pressure:.0%}'}: "
            f"{'busy' if host.get('busy') else 'quiet'}"
        )
        caveats = {f.query_name for f in result.findings if f.code == "PS203"}
        for query in result.queries:
            timing = query.timing
            decided = timing.verdict in (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.UNCHANGED)
            shown = timing.describe() if decided else timing.describe().split(":")[0]
            flag = "  PS203: at risk" if query.query_name in caveats else ""
            print(f"  {query.label:<14} {timing.verdict.value:<12} {shown}{flag}")
    print(f"\nstore: {store}")


if __name__ == "__main__":
    main()
