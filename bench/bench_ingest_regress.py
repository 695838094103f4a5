"""Benchmark of `planshift ingest` against pgBadger -j1 on PostgreSQL's regression-suite logs (not a test).

    python bench/bench_ingest_regress.py --regress-dir SRC/src/test/regress [--mb 24] [--rounds 3]

The logs come from a real PostgreSQL 15 server running its own regression suite under
auto_explain (`regress_log.regress_logs`): one run with JSON plans and one with text plans, each
logged at once as stderr, csvlog and jsonlog; cached in --cache so reruns skip the suite. Each
log is cut to its first --mb MB at an entry boundary: nearly every query text in it is distinct,
like a day of a varied application.

On exactly the same bytes, in --rounds alternated rounds (planshift, pgBadger, planshift, ...),
each in a fresh process: `planshift ingest` (the installed CLI, format given) and pgBadger -j 1
(Debian's `pgbadger`, HTML to a temp file). CPU seconds of the whole process tree (getrusage of
the reaped children) give MB per CPU-second, which depends less on what else runs than MB/s.
The limit: a minimal in-process reader over the same file (split the entries, take the plan,
orjson.loads for JSON plans, split the lines of a text plan), MB per CPU-second. --baseline
DIR measures another checkout's code in the same rounds (before/after on one machine state).
Printed:
medians, planshift / pgBadger, planshift / the limit, the start-up cost of an ingest of a tiny
log, and the load average beside each figure.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from regress_log import PREFIX, find_regress_dir, regress_logs  # noqa: E402

MB = 1 << 20
BADGER_FORMAT = {"stderr": "stderr", "csvlog": "csv", "jsonlog": "jsonlog"}
_ENTRY = re.compile(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", re.MULTILINE)


def load() -> str:
    return "load {:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())


def cut(log: Path, fmt: str, out: Path, mb: int) -> Path:
    """The first `mb` MB of `log`, cut before an entry that begins a line."""
    if out.exists():
        return out
    data = log.read_bytes()[: mb * MB]
    if len(data) == mb * MB:
        boundary = b"\n{" if fmt == "jsonlog" else b"\n20"
        data = data[: data.rfind(boundary) + 1]
    out.write_bytes(data)
    return out


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_tree(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of `command` and every process it waited for."""
    before, started = children_cpu(), time.perf_counter()
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=3600, check=False, env=env
    )
    wall, cpu = time.perf_counter() - started, children_cpu() - before
    if result.returncode != 0:
        raise SystemExit(f"{command[0]} failed: {result.stderr.strip()[-400:]}")
    return wall, cpu


def planshift(log: Path, fmt: str, workdir: Path, code: Path | None = None) -> tuple[float, float]:
    """The installed CLI; `code`: with the packages of that checkout instead (PYTHONPATH)."""
    store = workdir / "bench.duckdb"
    for path in (store, store.with_name(store.name + ".wal")):
        path.unlink(missing_ok=True)
    binary = str(Path(sys.executable).parent / "planshift")
    command = [binary, "ingest", str(log), "--store", str(store), "--format", fmt]
    if fmt == "stderr":
        command += ["--log-line-prefix", PREFIX]
    env = None if code is None else {**os.environ, "PYTHONPATH": str(code)}
    return run_tree(command, env)


def pgbadger(log: Path, fmt: str, workdir: Path) -> tuple[float, float]:
    binary = shutil.which("pgbadger")
    if binary is None:
        raise SystemExit("pgbadger is not installed (Debian: apt-get install pgbadger)")
    command = [binary, "--quiet", "-j", "1", "-f", BADGER_FORMAT[fmt], "-o"]
    command += [str(workdir / "pgbadger.html"), str(log)]
    if fmt == "stderr":
        command += ["--prefix", PREFIX]
    return run_tree(command)


def _plan(message: bytes | str, parse: Callable[[bytes], object]) -> int:
    if isinstance(message, str):
        message = message.encode()
    at = message.find(b"plan:\n")
    if at < 0:
        return 0
    parse(message[at + 6 :])
    return 1


def _parse_json(body: bytes) -> object:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:  # PostgreSQL 15 writes invalid JSON for some MERGE plans
        return None


def _parse_text(body: bytes) -> object:
    return body.split(b"\n")


def limit(log: Path, fmt: str, plan_format: str) -> tuple[float, int]:
    """CPU seconds of a minimal reader of `log` (split, plan, parse) and the plans it found."""
    parse = _parse_json if plan_format == "json" else _parse_text
    started, plans = time.process_time(), 0
    if fmt == "stderr":
        data = log.read_bytes()
        starts = [m.start() for m in _ENTRY.finditer(data)] + [len(data)]
        for begin, end in itertools.pairwise(starts):
            plans += _plan(data[begin:end], parse)
    elif fmt == "csvlog":
        with log.open(encoding="utf-8", newline="") as handle:
            for row in csv.reader(handle):
                if len(row) > 13 and row[13].startswith("duration:"):
                    plans += _plan(row[13], parse)
    else:
        with log.open("rb") as handle:
            for line in handle:
                message = orjson.loads(line).get("message", "")
                if message.startswith("duration:"):
                    plans += _plan(message, parse)
    return time.process_time() - started, plans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--regress-dir", type=Path, default=None)
    parser.add_argument("--mb", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plan-formats", nargs="+", default=["json", "text"])
    parser.add_argument("--formats", nargs="+", default=list(BADGER_FORMAT))
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "planshift-bench-regress"
    )
    parser.add_argument("--no-pgbadger", action="store_true")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a checkout (e.g. `git archive main collectors detector rules`) measured as "
        "'before' in the same rounds: its packages shadow the installed ones",
    )
    args = parser.parse_args()
    regress_dir = find_regress_dir(args.regress_dir)
    if regress_dir is None:
        raise SystemExit(
            "PostgreSQL's regression SQL (src/test/regress of a 15.x source tree) is not in this "
            "installation: pass --regress-dir (Debian: apt-get source postgresql-15)"
        )
    workdir = Path(tempfile.mkdtemp(prefix="planshift-bench-"))
    logs: list[tuple[str, str, Path]] = []
    for plan_format in args.plan_formats:
        full = regress_logs(args.cache, regress_dir, plan_format)
        for fmt in args.formats:
            out = args.cache / f"regress-{plan_format}-{args.mb}mb-{full[fmt].name}"
            logs.append((fmt, plan_format, cut(full[fmt], fmt, out, args.mb)))
    print(f"{os.cpu_count()} cores, {load()}")
    figures: dict[str, dict[str, list[float]]] = {}
    for round_number in range(args.rounds):
        for fmt, plan_format, log in logs:
            name = f"{fmt}/{plan_format}"
            found = figures.setdefault(
                name, {"planshift": [], "baseline": [], "pgbadger": [], "limit": []}
            )
            size = log.stat().st_size / MB
            tools: list[tuple[str, Callable[[], float]]] = [
                ("planshift", lambda: planshift(log, fmt, workdir)[1]),  # noqa: B023
                ("limit", lambda: limit(log, fmt, plan_format)[0]),  # noqa: B023
            ]
            if args.baseline is not None:
                base = args.baseline
                tools.append(("baseline", lambda: planshift(log, fmt, workdir, base)[1]))  # noqa: B023
            if not args.no_pgbadger:
                tools.append(("pgbadger", lambda: pgbadger(log, fmt, workdir)[1]))  # noqa: B023
            if round_number % 2:
                tools.reverse()
            for tool, measure in tools:
                found[tool].append(size / measure())
            print(
                f"round {round_number + 1} {name} {size:.0f} MB: "
                + ", ".join(f"{t} {v[-1]:.1f}" for t, v in found.items() if v)
                + f" MB/CPU-s, {load()}",
                flush=True,
            )
    report(logs, figures)
    startup(workdir, logs, None)
    if args.baseline is not None:
        startup(workdir, logs, args.baseline)
    (workdir / "results.json").write_text(json.dumps(figures, indent=2))
    print(f"figures: {workdir / 'results.json'}")


def report(logs: list[tuple[str, str, Path]], figures: dict[str, dict[str, list[float]]]) -> None:
    print(f"\nmedians, MB per CPU-second of the process tree ({load()}):")
    print("| log | MB | plans | baseline | planshift | pgBadger -j1 | ratio | limit | % of limit |")
    print("|---|---|---|---|---|---|---|---|---|")
    for fmt, plan_format, log in logs:
        found = figures[f"{fmt}/{plan_format}"]
        ours, ceiling = statistics.median(found["planshift"]), statistics.median(found["limit"])
        badger = statistics.median(found["pgbadger"]) if found["pgbadger"] else float("nan")
        base = statistics.median(found["baseline"]) if found["baseline"] else float("nan")
        plans = limit(log, fmt, plan_format)[1]
        print(
            f"| {fmt}, {plan_format} plans | {log.stat().st_size / MB:.0f} | {plans} | "
            f"{base:.1f} | {ours:.1f} | {badger:.1f} | {ours / badger:.1f}x | {ceiling:.0f} | "
            f"{ours / ceiling:.0%} |"
        )


def startup(workdir: Path, logs: list[tuple[str, str, Path]], code: Path | None) -> None:
    """Wall and CPU of an ingest of the first ~20 KB of the stderr log (medians of 3)."""
    fmt, _, log = next(item for item in logs if item[0] == "stderr")
    data = log.read_bytes()[: 20 * 1024]
    tiny = workdir / "tiny.log"
    tiny.write_bytes(data[: data.rfind(b"\n20") + 1])
    runs = [planshift(tiny, fmt, workdir, code) for _ in range(3)]
    wall = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[1] for r in runs)
    who = "planshift" if code is None else f"baseline ({code})"
    print(f"start-up, {who}: ingest of a {len(tiny.read_bytes()) / 1024:.0f} KB log: {wall:.2f} s wall, "
          f"{cpu:.2f} CPU-s ({load()})")  # fmt: skip


if __name__ == "__main__":
    main()
