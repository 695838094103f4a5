"""Faults: kill -9 at random points of ingest, ingest --lake and run, a writer killed while
another waits, a disk filling up, PostgreSQL killed mid-run, a parallel-ingest worker dying,
damaged and immutable stores, broken logs. Each checks that nothing stored is lost, that no
command ends in a traceback, and that a rerun completes.

Kill points are drawn by a seeded RNG: PLANSHIFT_FAULT_SEED=N replays a run (the seed is in
every assertion message); without it each session draws a new seed.
"""

from __future__ import annotations

import gzip
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import FreshDb, consistent, stored
from typer.testing import CliRunner

from collectors.logs import autoexplain as autoexplain_log
from collectors.logs import parallel as log_parallel
from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.installations import find_installation
from detector.cli.app import app
from detector.errors import PlanshiftError
from detector.store import Store
from detector.store.lake import materialize

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "fixtures" / "logs"
REPRO = LOGS / "repro"
SEED = int(os.environ.get("PLANSHIFT_FAULT_SEED") or random.SystemRandom().randrange(2**32))


def rng(name: str) -> random.Random:
    return random.Random(f"{SEED}:{name}")


def planshift(*args: object, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "detector", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def done(*args: object, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = planshift(*args, env=env)
    out, err = process.communicate(timeout=300)
    return process.returncode, out, err


def cli(*args: object, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """planshift in this process (no interpreter start): exit code, stdout, stderr; a
    traceback (an exception other than the exit) is shown as one in stderr."""
    result = CliRunner().invoke(app, [str(arg) for arg in args], env=env)
    err = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        err += "\nTraceback: " + "".join(traceback.format_exception(result.exception))
    return result.exit_code, result.stdout, err


def killed_after(delay: float, *args: object, env: dict[str, str] | None = None) -> int:
    """Start planshift, SIGKILL it after `delay` seconds (unless it ended); its exit code."""
    process = planshift(*args, env=env)
    try:
        process.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    return process.returncode


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real server log repeated to ~4 MB: an ingest long enough to be killed inside."""
    path = tmp_path_factory.mktemp("faults") / "postgresql.log"
    path.write_bytes((LOGS / "incident" / "pg.log").read_bytes() * 20)
    return path


def assert_no_traceback(err: str, context: str) -> None:
    assert "Traceback" not in err, f"{context} (PLANSHIFT_FAULT_SEED={SEED}): {err[-2000:]}"


# -- kill -9 ---------------------------------------------------------------------------------


def test_ingest_killed_at_random_points_loses_nothing_and_resumes(
    big_log: Path, tmp_path: Path
) -> None:
    reference = tmp_path / "reference.duckdb"
    started = time.monotonic()
    code, _, err = done("ingest", big_log, "--store", reference)
    duration = time.monotonic() - started  # of a whole ingest, interpreter start included
    assert code == 0, err
    expected = stored(reference)
    draw = rng("ingest")
    for attempt in range(2):
        store = tmp_path / f"killed{attempt}.duckdb"
        delay = draw.uniform(0.1, duration)
        killed_after(delay, "ingest", big_log, "--store", store)
        code, _, err = cli("ingest", big_log, "--store", store)
        context = f"ingest killed after {delay:.2f} of {duration:.2f} s, attempt {attempt}"
        assert code == 0, (context, SEED, err)
        assert_no_traceback(err, context)
        assert stored(store) == expected, (context, SEED)
        consistent(store)
        with Store(store, read_only=True) as reopened:
            assert reopened.runs()[-1].status == "complete", (context, SEED)
            assert all(r.status in ("complete", "failed") for r in reopened.runs()), (context, SEED)
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], (context, SEED)


def lake_rows(lake: Path, into: Path) -> list[tuple[Any, ...]]:
    materialize(lake, into)
    with Store(into, read_only=True) as store:
        return list(
            store._con.execute(
                "SELECT t.name, e.line, o.fingerprint, o.duration_ms, o.collected_at "
                "FROM observations o JOIN targets t USING (target_id) "
                "JOIN log_entries e USING (observation_id) ORDER BY ALL"
            ).fetchall()
        )


def test_ingest_to_a_lake_killed_inside_the_export_loses_nothing(
    big_log: Path, tmp_path: Path
) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    reference_lake = tmp_path / "reference-lake"
    code, _, err = cli("ingest", big_log, "--source", "db1", "--lake", reference_lake, env=env)
    assert code == 0, err
    expected = lake_rows(reference_lake, tmp_path / "reference.duckdb")
    draw = rng("lake")
    for attempt in range(2):
        lake = tmp_path / f"lake{attempt}"
        store = tmp_path / f"db1-{attempt}.duckdb"
        process = planshift("ingest", big_log, "--source", "db1", "--store", store, "--lake", lake)
        assert process.stdout is not None
        for line in process.stdout:  # the store is written: the export starts now
            if " plans from " in line:
                break
        delay = draw.uniform(0.0, 0.4)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)
        code, _, err = cli("ingest", big_log, "--source", "db1", "--store", store, "--lake", lake)
        context = f"ingest --lake killed {delay:.3f} s into the export, attempt {attempt}"
        assert code == 0, (context, SEED, err)
        assert_no_traceback(err, context)
        assert lake_rows(lake, tmp_path / f"read{attempt}.duckdb") == expected, (context, SEED)


WORKLOAD = """
[workload]
name = "faults"
repetitions = 10
warmup = 1

[setup]
sql = "DROP TABLE IF EXISTS t; CREATE TABLE t AS SELECT i AS id, i % 10 AS v FROM generate_series(1, 20000) i"

[variants.a]
work_mem = "4MB"
[variants.b]
work_mem = "64MB"

[[queries]]
name = "scan"
sql = "SELECT v, count(*) FROM t GROUP BY v"
"""


def test_run_killed_at_a_random_point_is_marked_failed_and_a_rerun_completes(
    tmp_path: Path, pg17: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    workload, store = tmp_path / "w.toml", tmp_path / "runs.duckdb"
    workload.write_text(WORKLOAD)
    target = ["--dsn", f"db={fresh_db(pg17)}", "--setup", "--store", store]
    started = time.monotonic()
    code, _, err = done("run", workload, *target, "--label", "before")
    duration = time.monotonic() - started
    assert code == 0, err
    delay = rng("run").uniform(0.1, duration)
    killed_after(delay, "run", workload, *target, "--label", "killed")
    code, _, err = cli("run", workload, *target, "--label", "after")
    context = f"run killed after {delay:.2f} of {duration:.2f} s"
    assert code == 0, (context, SEED, err)
    assert_no_traceback(err, context)
    with Store(store, read_only=True) as reopened:
        runs = {run.label: run for run in reopened.runs()}
        observations = reopened._con.execute(
            "SELECT r.label, count(*) FROM observations JOIN runs r USING (run_id) GROUP BY ALL"
        ).fetchall()
    assert runs["before"].status == runs["after"].status == "complete", (context, SEED)
    counts = dict(observations)
    assert counts["before"] == counts["after"] == 2 * 10, (context, SEED, counts)
    killed = runs.get("killed")  # not begun yet, cut short, or done before the kill
    assert killed is None or killed.status == "failed" or counts["killed"] == 2 * 10, (
        context,
        SEED,
    )


def test_a_writer_killed_while_another_waits_hands_the_store_over(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    with Store(path) as store:
        run = store.begin_run("kept", workload_hash=None, tool_version="t", host="h")
        store.finish_run(run)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from detector.store import Store; s = Store(sys.argv[1]); "
         "print('ready', flush=True); time.sleep(120)", str(path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    heard: list[str] = []

    def kill_holder(message: str) -> None:
        heard.append(message)
        holder.send_signal(signal.SIGKILL)

    with Store(path, on_wait=kill_holder) as store:  # waits, the holder dies, the lock is free
        run = store.begin_run("after", workload_hash=None, tool_version="t", host="h")
        store.finish_run(run)
        labels = [r.label for r in store.runs()]
    holder.wait(timeout=30)
    assert heard and f"process {holder.pid}" in heard[0]
    assert labels == ["kept", "after"]


# -- a disk filling up ------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {result.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_an_error_that_loses_nothing_and_a_rerun_completes(
    small_disk: Path, tmp_path: Path
) -> None:
    store = small_disk / "s.duckdb"
    first, second = LOGS / "pg15" / "pg.log", LOGS / "incident" / "pg.log"
    code, _, err = cli("ingest", first, "--store", store)
    assert code == 0, err
    before = stored(store)
    code, _, err = cli("ingest", second, "--store", store)
    assert code == 2, err
    assert_no_traceback(err, "ingest on a full disk")
    assert "No space left on device" in err and "hint: the file system of" in err, err
    assert stored(store) == before  # what was stored stays
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    code, _, err = cli("ingest", second, "--store", store)
    assert code == 0, err
    reference = tmp_path / "reference.duckdb"
    for log in (first, second):
        assert cli("ingest", log, "--store", reference)[0] == 0
    assert stored(store) == stored(reference)


# -- PostgreSQL killed mid-run ------------------------------------------------------------------


@pytest.fixture(scope="module")
def crashing() -> Iterator[EmbeddedCluster]:
    """A cluster of this module's own: the test below crashes it (it restarts by itself)."""
    try:
        installation = find_installation(17)
    except PlanshiftError as exc:
        pytest.skip(f"PostgreSQL 17 is not available ({exc})")
    with EmbeddedCluster(installation, name="faults-crash") as cluster:
        yield cluster


def measuring_backend(conninfo: str, deadline: float) -> int:
    while time.monotonic() < deadline:
        with psycopg.connect(conninfo, autocommit=True) as admin:
            row = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'planshift' "
                "AND datname = current_database() AND query LIKE 'EXPLAIN%'"
            ).fetchone()
        if row:
            return int(row[0])
        time.sleep(0.05)
    raise AssertionError("the run never started measuring")


@pytest.mark.pg
def test_postgresql_killed_mid_run_keeps_the_failed_run_and_a_rerun_completes(
    tmp_path: Path, crashing: EmbeddedCluster
) -> None:
    workload, store = tmp_path / "w.toml", tmp_path / "new" / "runs.duckdb"
    workload.write_text(WORKLOAD.replace("count(*)", "count(*), pg_sleep(0.01)"))
    target = ["--dsn", f"db={crashing.conninfo}", "--setup", "--store", store]
    delay = rng("postgres").uniform(0.0, 0.5)
    process = planshift("run", workload, *target)
    backend = measuring_backend(crashing.conninfo, time.monotonic() + 60)
    time.sleep(delay)
    os.kill(backend, signal.SIGKILL)  # a backend killed: the server restarts every session
    _, err = process.communicate(timeout=120)
    context = f"a backend of the server killed {delay:.2f} s into the measurements"
    assert process.returncode == 2, (context, SEED, err)
    assert_no_traceback(err, context)
    assert "error: " in err and "hint: " in err, (context, SEED, err)
    with Store(store, read_only=True) as kept:  # a new store: kept, with the run marked failed
        assert [r.status for r in kept.runs()] == ["failed"], (context, SEED)
    for _ in range(300):  # crash recovery
        try:
            psycopg.connect(crashing.conninfo).close()
            break
        except psycopg.OperationalError:
            time.sleep(0.1)
    code, _, err = cli("run", workload, *target)
    assert code == 0, (context, SEED, err)
    with Store(store, read_only=True) as kept:
        assert [r.status for r in kept.runs()] == ["failed", "complete"], (context, SEED)


# -- a parallel-ingest worker dying -----------------------------------------------------------


def _children(parent: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def test_a_parallel_ingest_whose_workers_die_is_an_error_and_a_rerun_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers killed while chunks are in flight: the pool breaks in result() or, before
    the next chunk, in submit() (a raw BrokenProcessPool traceback before): either way
    error+hint, what was stored stays, and the next ingest resumes and stores the rest."""
    from multiprocessing import forkserver

    log = tmp_path / "pg.log"
    log.write_bytes((LOGS / "incident" / "pg.log").read_bytes() * 4)
    sequential = tmp_path / "sequential.duckdb"
    assert cli("ingest", log, "--store", sequential, "-j", "1")[0] == 0
    monkeypatch.setattr(autoexplain_log, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setattr(log_parallel, "CHUNK_BYTES", 20_000)
    monkeypatch.setattr(log_parallel, "TAIL_SEARCH", 2_000)
    killed: list[int] = []
    next_result = log_parallel.ParallelRead._next

    def kill_workers_first(self: log_parallel.ParallelRead, pending: Any) -> Any:
        server = getattr(forkserver._forkserver, "_forkserver_pid", None)
        if not killed and server:
            for pid in _children(server):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.3)  # the pool sees its workers gone
        return next_result(self, pending)

    monkeypatch.setattr(log_parallel.ParallelRead, "_next", kill_workers_first)
    parallel = tmp_path / "parallel.duckdb"
    code, _, err = cli("ingest", log, "--store", parallel, "-j", "2")
    assert killed, "no worker was running to kill"
    assert code == 2, err
    assert_no_traceback(err, "workers killed")
    assert "error: a process parsing the log died" in err and "hint: rerun" in err, err
    monkeypatch.setattr(log_parallel.ParallelRead, "_next", next_result)
    code, _, err = cli("ingest", log, "--store", parallel, "-j", "2")
    assert code == 0, err
    assert stored(parallel) == stored(sequential)
    consistent(parallel)


# -- damaged stores, immutable stores, broken logs --------------------------------------------


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real store with one byte flipped in every data block (DuckDB checksums each block)."""
    path = tmp_path_factory.mktemp("damaged") / "damaged.duckdb"
    assert cli("ingest", LOGS / "incident" / "pg.log", "--store", path)[0] == 0
    data = bytearray(path.read_bytes())
    header, block = 3 * 4096, 256 * 1024
    for start in range(header, len(data) - 64, block):
        data[start + 64] ^= 0x5A
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize(
    "command",
    [["runs"], ["timeline"], ["census"], ["compare", "-b", "a", "-c", "b"],
     ["ingest", str(LOGS / "pg15" / "pg.log")], ["fleet"]],
    ids=lambda c: c[0],
)  # fmt: skip
def test_a_checksum_corrupt_store_is_an_input_error(
    damaged: Path, tmp_path: Path, command: list[str]
) -> None:
    path = tmp_path / "copy.duckdb"
    shutil.copyfile(damaged, path)
    code, out, err = cli(*command, "--store", path)
    assert code == 2, (out, err)
    assert_no_traceback(err, " ".join(command))
    assert err.startswith("error: ") and "\nhint: " in err, err
    assert "damaged" in err or "Corrupt" in err or "not a planshift store" in err, err


def test_an_immutable_store_is_named_not_writable(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    assert cli("ingest", LOGS / "pg15" / "pg.log", "--store", path)[0] == 0
    before = stored(path)
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported on this file system")
    try:
        code, _, err = cli("ingest", LOGS / "incident" / "pg.log", "--store", path)
        reading = cli("runs", "--store", path)
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
    assert code == 2, err
    assert f"error: store {path} is not writable: Operation not permitted" in err, err
    assert "damaged" not in err and "lsattr" in err
    assert reading[0] == 0, reading[2]  # reading an immutable store still works
    assert stored(path) == before


def test_a_queryid_outside_64_bits_is_read_as_unknown_and_every_plan_stored(
    tmp_path: Path,
) -> None:
    log = tmp_path / "qid_overflow.stderr.log"
    text = gzip.decompress((REPRO / "qid_overflow.stderr.log.gz").read_bytes())
    log.write_bytes(text)
    plans = text.count(b"LOG:  duration: ")  # every plan entry of the file (each has its own)
    repaired = tmp_path / "repaired.stderr.log"
    repaired.write_bytes(text.replace(b"qid=-36252682273174154400", b"qid=-3625268227317415440"))
    counts = []
    for path in (log, repaired):
        store = tmp_path / f"{path.stem}.duckdb"
        code, out, err = cli("ingest", path, "--store", store)
        assert code == 0, err
        counts.append(consistent(store))
        if path == log:
            assert f"{log}:5: bad-queryid: query id -36252682273174154400 is outside" in out
    assert counts == [(plans, 1), (plans, 0)]


@pytest.mark.parametrize("name", sorted(p.name for p in REPRO.iterdir()))
def test_every_repro_log_ingests_without_a_traceback(tmp_path: Path, name: str) -> None:
    code, _, err = cli("ingest", REPRO / name, "--store", tmp_path / "s.duckdb")
    assert code == 0, err
    assert_no_traceback(err, name)
