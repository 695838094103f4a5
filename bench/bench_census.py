"""`planshift census` on a large store: wall time and peak memory, against the observations.

    .venv/bin/python bench/bench_census.py [--observations 5000000] [--repeat 3] [--store PATH]
        [--before 1000000]

The store: a real server log (tests/fixtures/logs/incident/pg.log, 150 auto_explain plans of
PostgreSQL 17) ingested by planshift, its observations then copied in DuckDB SQL (new ids,
the same queries, plan shapes and points) up to --observations, all in the ingest's run. Then
`planshift census --store` runs --repeat times in a child process each: wall time and the
child's peak RSS (getrusage), medians, with the load average beside them.

--before N also times the census as it was before it streamed (every observation read into
Python, then counted) on a store of N observations, in the same run, for the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "tests" / "fixtures" / "logs" / "incident" / "pg.log"
BEFORE = """
import sys
from collections import Counter, defaultdict
from detector.store import Store
with Store(sys.argv[1], read_only=True) as store:
    targets = store.targets([store.run_or_latest(None)])
    names = {t.target_id: t.name for t in targets}
    queries, signature_of = store.queries(), {}
    grouped = defaultdict(lambda: defaultdict(Counter))
    for row in store.observations(list(names)):
        if row.fingerprint not in signature_of:
            signature_of[row.fingerprint] = store.plan_record(row.fingerprint).signature
        name = queries[row.query_key].name
        grouped[name][(names[row.target_id], row.point)][signature_of[row.fingerprint]] += 1
print(sum(sum(c.values()) for g in grouped.values() for c in g.values()))
"""


def build(path: Path, observations: int) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "detector", "ingest", str(LOG), "--store", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    con = duckdb.connect(str(path))
    (have,) = con.execute("SELECT count(*) FROM observations").fetchone()
    copies = -(-observations // have) - 1
    columns = [
        name
        for (name,) in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = 'observations' "
            "AND column_name <> 'observation_id' ORDER BY column_index"
        ).fetchall()
    ]
    names = ", ".join(columns)
    con.execute(
        f"INSERT INTO observations ({names}) SELECT {names} FROM observations, range(?) LIMIT ?",
        [copies, observations - have],
    )
    con.close()


PEAK = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
sys.exit(done.returncode)
"""


def timed(*command: str) -> tuple[float, float, str]:
    """(wall s, peak RSS MB, stdout) of one child process (measured by a wrapper of its own,
    so each figure is that child's alone)."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", PEAK, *command], capture_output=True, text=True, check=False
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    peak_kb = int(done.stderr.strip().splitlines()[-1])
    return wall, peak_kb / 1024, done.stdout


def report(label: str, runs: list[tuple[float, float, str]], observations: int) -> None:
    walls = [wall for wall, _, _ in runs]
    peak = max(rss for _, rss, _ in runs)
    print(
        f"{label}: {observations:,} observations: median {statistics.median(walls):.2f} s "
        f"(runs {', '.join(f'{w:.2f}' for w in walls)}), peak RSS {peak:.0f} MB; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--observations", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--before", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="planshift-census-") as tmp:
        path = args.store or Path(tmp) / "census.duckdb"
        if not path.exists():
            build(path, args.observations)
        census = [sys.executable, "-m", "detector", "census", "--store", str(path)]
        runs = [timed(*census) for _ in range(args.repeat)]
        report("census (streamed)", runs, args.observations)
        if args.before:
            small = Path(tmp) / "before.duckdb"
            build(small, args.before)
            report("census (streamed)", [timed(*census[:-1], str(small))], args.before)
            old = [sys.executable, "-c", BEFORE, str(small)]
            report("census (before: every row in Python)", [timed(*old)], args.before)


if __name__ == "__main__":
    main()
