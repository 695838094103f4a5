"""Broken and hostile input: interleaved backends, corrupted logs (seeded fuzzing), huge plans,
and an ingest killed with SIGKILL midway. Logs come from a real cluster (tests/test_ingest.py)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import ingest, stored

from collectors.logs import formats as log_formats
from detector.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "logs"))
from capture_logs import PREFIX, plan_entries, replicate
from helpers import consistent, corrupt, json_entries, with_pid

pytestmark = pytest.mark.pg
ROOT = Path(__file__).resolve().parent.parent


def test_interleaved_backends_are_reassembled(
    live_logs: Callable[[int], Path], tmp_path: Path
) -> None:
    a, b, c = json_entries(live_logs(17))[:3]
    b, c = with_pid(b, 4242), with_pid(c, 4343)
    a_lines = a.splitlines(keepends=True)
    cut = len(a_lines) // 2
    stamp = a.split(b" [", 1)[0]
    statement = stamp + b" [5151] app@json_on qid=0 LOG:  duration: 0.020 ms  statement: SELECT 1\n"
    detail = stamp + b" [5252] app@json_on qid=0 DETAIL:  parameters: $1 = '1'\n"
    woven = b"".join(
        [
            *a_lines[:cut],
            statement,  # another backend's one-line message inside A's JSON
            *a_lines[cut : cut + 3],
            b,  # another backend's whole plan inside A's JSON
            detail,
            *a_lines[cut + 3 :],
            c,
        ]
    )
    (tmp_path / "woven.log").write_bytes(woven)
    (tmp_path / "clean.log").write_bytes(a + b + c)
    (report,) = ingest(tmp_path / "woven.duckdb", tmp_path / "woven.log")
    assert report.plans == 3 and report.problem_count == 0, report.problems
    ingest(tmp_path / "clean.duckdb", tmp_path / "clean.log")
    assert stored(tmp_path / "woven.duckdb") == stored(tmp_path / "clean.duckdb")


@pytest.mark.parametrize("name", ["pg.log", "pg.csv", "pg.json"])
@pytest.mark.parametrize("seed", range(6))
def test_corrupted_logs_are_counted_never_fatal(
    live_logs: Callable[[int], Path], tmp_path: Path, name: str, seed: int
) -> None:
    original = (live_logs(17) / name).read_bytes()
    rng = random.Random(seed)
    broken = corrupt(original, rng, operations=12)
    if seed % 3 == 0:
        broken = broken[: rng.randrange(len(broken) // 2, len(broken))]  # cut short
    path = tmp_path / f"broken-{name}"
    path.write_bytes(broken)
    (clean,) = ingest(tmp_path / "clean.duckdb", live_logs(17) / name)
    (report,) = ingest(tmp_path / "s.duckdb", path)
    stored_plans, problems = consistent(tmp_path / "s.duckdb")
    assert stored_plans == report.plans <= clean.plans + 12
    assert problems == report.problem_count
    total_lines = broken.count(b"\n") + 1
    assert all(1 <= p.line <= total_lines for p in report.problems + report.incomplete)
    if seed % 3 != 0:
        assert report.plans >= clean.plans - 2 * 12  # one operation breaks at most two entries
    (again,) = ingest(tmp_path / "s.duckdb", path)
    assert again.plans == 0 and again.problem_count == 0
    assert consistent(tmp_path / "s.duckdb") == (stored_plans, problems)


def test_huge_plans_are_stored_and_oversized_entries_skipped(
    live_logs: Callable[[int], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = json_entries(live_logs(17))[0]
    head = entry.partition(b"\n")[0]
    node = b'\t      {"Node Type": "Seq Scan", "Relation Name": "t", "Total Cost": 1.0},\n'
    members = node * 20_000 + node.rstrip(b",\n") + b"\n"
    huge = (
        head + b'\n\t{\n\t  "Query Text": "SELECT 1",\n\t  "Plan": {"Node Type": "Append", '
        b'"Total Cost": 5.0,\n\t    "Plans": [\n' + members + b"\t  ]}\n\t}\n"
    )
    (tmp_path / "huge.log").write_bytes(huge + entry)
    (report,) = ingest(tmp_path / "s.duckdb", tmp_path / "huge.log")
    assert report.plans == 2 and report.problem_count == 0
    monkeypatch.setattr(log_formats, "MAX_ENTRY", 1 << 20)
    monkeypatch.setattr(log_formats, "CHUNK", 1 << 18)
    (skipped,) = ingest(tmp_path / "small.duckdb", tmp_path / "huge.log")
    assert skipped.problem_count >= 1
    assert {p.kind for p in skipped.problems} & {"too-large", "truncated"}
    consistent(tmp_path / "small.duckdb")


def test_an_ingest_killed_midway_leaves_a_consistent_store_and_resumes(
    live_logs: Callable[[int], Path], tmp_path: Path
) -> None:
    log = tmp_path / "big.log"
    written = replicate(plan_entries(live_logs(17) / "pg.log"), log, 60 << 20, seed=3)
    store = tmp_path / "s.duckdb"
    command = [sys.executable, "-m", "detector", "ingest", str(log), "--store", str(store)]
    command += ["--log-line-prefix", PREFIX]
    env = dict(os.environ)
    wal = store.with_name(store.name + ".wal")
    for _ in range(3):  # a kill inside the first commit leaves a consistent empty store: again
        store.unlink(missing_ok=True)
        wal.unlink(missing_ok=True)
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE)
        deadline = time.monotonic() + 60
        # killed once a few batches are in the write-ahead log, well before the end of the log
        while time.monotonic() < deadline and not (wal.exists() and wal.stat().st_size > 2 << 20):
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert process.returncode == -signal.SIGKILL, "the ingest finished before it was killed"
        # read a copy: opening the store itself would mark the orphaned run failed before the
        # rerun
        snapshot = tmp_path / "snapshot.duckdb"
        snapshot.with_name(snapshot.name + ".wal").unlink(missing_ok=True)
        shutil.copyfile(store, snapshot)
        if wal.exists():
            shutil.copyfile(wal, snapshot.with_name(snapshot.name + ".wal"))
        partial, _ = consistent(snapshot)
        if partial:
            break
    assert 0 < partial < written
    finished = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    # its process is gone: the next open marks the run failed, and the ingest says so
    assert "interrupted" in finished.stdout and "resumed at line" in finished.stdout
    total, problems = consistent(store)
    assert (total, problems) == (written, 0)
    with Store(store, read_only=True) as db:
        assert [run.status for run in db.runs()] == ["failed", "complete"]
        assert db.runs()[0].note


def test_a_large_log_ingests_where_a_directory_shadows_planshifts_packages(
    live_logs: Callable[[int], Path], tmp_path: Path
) -> None:
    """The parsing workers import planshift, not a `collectors/` or `rules/` of the directory
    the user runs planshift from (the fork server's `python -c` put it first on their path)."""
    for package in ("collectors", "detector", "rules"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text('"""Not planshift\'s."""\n')
    log = tmp_path / "big.log"
    written = replicate(plan_entries(live_logs(17) / "pg.log"), log, 40 << 20, seed=4)
    planshift = Path(sys.executable).with_name("planshift")  # the installed console script
    command = [str(planshift), "ingest", log.name, "--store", "s.duckdb", "--jobs", "2"]
    as_a_user = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}  # conftest's
    done = subprocess.run(
        [*command, "--log-line-prefix", PREFIX],
        cwd=tmp_path,
        env=as_a_user,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert consistent(tmp_path / "s.duckdb") == (written, 0)
