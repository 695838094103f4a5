"""Several processes on one store or one lake: none deletes, overwrites or loses another's data.

The collecting box of the README's fleet section runs one `ingest --lake` per host at once from
one directory; two cron jobs start on the same new store; two stores claim one host name in a
lake. Each case runs real planshift processes on real server logs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

from detector.store import Store
from detector.store.connection import lake_connection
from detector.store.lake import export_host, lake_hosts, materialize

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "fixtures" / "logs"
LOG = LOGS / "pg17" / "pg.log"
HOSTS = ("H1", "H2", "H3")


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), **extra}


def start(*args: object, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "detector", *map(str, args)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(processes: list[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    return [(p.wait(timeout=300), *p.communicate()) for p in processes]


def plans_in(log: Path, tmp_path: Path) -> int:
    """How many plans the log holds: one ingest of it alone, into a store of its own."""
    alone = tmp_path / "alone" / f"{log.parent.name}.duckdb"
    done = subprocess.run(
        [sys.executable, "-m", "detector", "ingest", str(log), "--store", str(alone)],
        capture_output=True, text=True, check=False, env=environment(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with Store(alone, read_only=True) as store:
        return int(store._con.execute("SELECT count(*) FROM observations").fetchone()[0])


def lake_counts(lake: Path, tmp_path: Path, name: str) -> dict[str, int]:
    merged = tmp_path / f"{name}.duckdb"
    materialize(lake, merged)
    with Store(merged, read_only=True) as store:
        rows = store._con.execute(
            "SELECT t.name, count(*) FROM observations o JOIN targets t USING (target_id) "
            "GROUP BY ALL"
        ).fetchall()
    return dict(rows)


def test_concurrent_lake_ingests_without_store_keep_every_hosts_plans_twice_in_a_row(
    tmp_path: Path,
) -> None:
    expected = plans_in(LOG, tmp_path)
    work, lake = tmp_path / "box", tmp_path / "box" / "L"
    work.mkdir()
    env = environment(tmp_path)
    for attempt in (1, 2):
        results = finish(
            [start("ingest", LOG, "--source", h, "--lake", "L", cwd=work, env=env) for h in HOSTS]
        )
        assert [code for code, _, _ in results] == [0, 0, 0], (attempt, results)
        assert not any("Traceback" in out + err for _, out, err in results)
        assert not (work / "planshift.duckdb").exists()  # no store shared in the directory
        assert lake_hosts(lake) == list(HOSTS)
        assert lake_counts(lake, tmp_path, f"attempt{attempt}") == dict.fromkeys(HOSTS, expected)
    stores = sorted((tmp_path / "data" / "planshift" / "lakes").glob("L-*/*.duckdb"))
    assert [p.name for p in stores] == [f"{h}.duckdb" for h in HOSTS]


def test_writers_of_one_store_take_turns_and_nothing_is_lost(tmp_path: Path) -> None:
    """Three ingests of different logs into one new --store at once (cron jobs): each waits for
    the one before, none deletes the store, the store holds every log's plans."""
    logs = [LOGS / name / "pg.log" for name in ("pg15", "incident", "events")]
    expected = sum(plans_in(log, tmp_path) for log in logs)
    store = tmp_path / "shared" / "planshift.duckdb"
    results = finish(
        [
            start("ingest", log, "--store", store, cwd=tmp_path, env=environment(tmp_path))
            for log in logs
        ]
    )
    assert [code for code, _, _ in results] == [0, 0, 0], results
    waited = [err for _, _, err in results if "is in use by process" in err]
    assert all("waiting for it" in err for err in waited)
    with Store(store, read_only=True) as reopened:
        count = reopened._con.execute("SELECT count(*) FROM observations").fetchone()[0]
        statuses = [run.status for run in reopened.runs()]
    assert count == expected and statuses == ["complete"] * 3
    assert [p.name for p in store.parent.iterdir()] == ["planshift.duckdb"]  # nothing hidden left


HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from detector.store import Store
    path, ready, outcome = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    release = ready.with_suffix(".release")
    with Store(path) as store:
        if outcome == "write":
            run = store.begin_run("holder", workload_hash=None, tool_version="t", host="h")
            store.finish_run(run)
        ready.write_text("ready")
        for _ in range(600):  # until the test says so (at most 60 s)
            if release.exists():
                break
            time.sleep(0.1)
        if outcome == "fail":
            raise SystemExit("failing on purpose")
    """
)


def holder(path: Path, outcome: str, tmp_path: Path) -> subprocess.Popen[str]:
    ready = tmp_path / f"ready-{outcome}"
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), str(ready), outcome],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    for _ in range(300):
        if ready.exists() or process.poll() is not None:
            break
        subprocess.run(["sleep", "0.05"], check=True)
    assert ready.exists(), process.communicate()
    return process


def test_a_creator_that_fails_removes_its_empty_store_but_never_the_waiters_run(
    tmp_path: Path,
) -> None:
    path = tmp_path / "new.duckdb"
    first = holder(path, "fail", tmp_path)  # created the store, holds it, will fail empty
    waiting: list[str] = []

    def release(message: str) -> None:
        waiting.append(message)
        (tmp_path / "ready-fail.release").write_text("go")

    with Store(path, on_wait=release) as store:  # waits; then the file is gone: recreate
        run = store.begin_run("waiter", workload_hash=None, tool_version="t", host="h")
        store.finish_run(run)
    assert first.wait(timeout=60) != 0
    assert waiting and "is in use by process" in waiting[0]
    with Store(path, read_only=True) as reopened:
        assert [r.label for r in reopened.runs()] == ["waiter"]


def test_a_second_writer_gives_up_after_the_wait_with_an_error_and_the_store_is_intact(
    tmp_path: Path,
) -> None:
    path = tmp_path / "held.duckdb"
    first = holder(path, "write", tmp_path)
    log = tmp_path / "postgresql.log"
    log.write_text("2024-05-01 12:00:00.000 UTC [1] LOG:  database system is ready\n")
    done = subprocess.run(
        [sys.executable, "-m", "detector", "ingest", str(log), "--store", str(path)],
        capture_output=True, text=True, check=False,
        env=environment(tmp_path, PLANSHIFT_STORE_WAIT="0.3"),
    )  # fmt: skip
    (tmp_path / "ready-write.release").write_text("go")
    assert first.wait(timeout=60) == 0
    assert done.returncode == 2, done.stderr
    assert f"error: store {path} is still in use by process " in done.stderr
    assert "after 0.3 s" in done.stderr
    assert "hint: " in done.stderr and "PLANSHIFT_STORE_WAIT" in done.stderr
    with Store(path, read_only=True) as reopened:
        assert [r.label for r in reopened.runs()] == ["holder"]


def test_two_stores_cannot_export_under_one_host_name(tmp_path: Path) -> None:
    lake, env = tmp_path / "lake", environment(tmp_path)
    first, second = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    for store, log in ((first, LOGS / "pg15" / "pg.log"), (second, LOGS / "incident" / "pg.log")):
        done = subprocess.run(
            [sys.executable, "-m", "detector", "ingest", str(log), "--source", "db1",
             "--store", str(store)], capture_output=True, text=True, check=False, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    export_host(first, lake, "db1")
    before = {p: p.read_bytes() for p in lake.rglob("*.parquet")}
    refused = subprocess.run(
        [sys.executable, "-m", "detector", "ingest", str(LOGS / "incident" / "pg.log"),
         "--source", "db1", "--store", str(second), "--lake", str(lake)],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert "error: host db1 in the lake belongs to another store: " in refused.stderr
    assert str(first.resolve()) in refused.stderr and "hint: " in refused.stderr
    assert {p: p.read_bytes() for p in lake.rglob("*.parquet")} == before
    copy = tmp_path / "copy-of-a.duckdb"  # the same store, elsewhere: still db1's owner
    shutil.copyfile(first, copy)
    assert export_host(copy, lake, "db1")["observations"] > 0
    assert export_host(second, lake, "db2")["observations"] > 0


def hostile_lake(tmp_path: Path) -> Path:
    lake = tmp_path / "lake"
    store = tmp_path / "h1.duckdb"
    done = subprocess.run(
        [sys.executable, "-m", "detector", "ingest", str(LOGS / "incident" / "pg.log"),
         "--source", "h1", "--store", str(store), "--lake", str(lake)],
        capture_output=True, text=True, check=False, env=environment(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (lake / "runs" / "host=h1" / "passwd.parquet").symlink_to("/etc/passwd")
    (lake / "queries" / "host=h1" / "notes.parquet").write_text("not parquet at all\n")
    odd = lake / "observations" / "host=h1" / "day=2026-11-22" / "odd.parquet"
    with duckdb.connect() as con:
        con.execute(
            f"COPY (SELECT 'one' AS run_id, 'slow' AS duration_ms) TO '{odd}' (FORMAT parquet)"
        )
    return lake


@pytest.mark.parametrize(
    "command",
    [["fleet"], ["fleet", "-q", "orders"], ["timeline", "--source", "h1"]],
    ids=lambda c: " ".join(c),
)
def test_hostile_files_in_the_lake_are_skipped_and_named(
    tmp_path: Path, command: list[str]
) -> None:
    lake = hostile_lake(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "detector", *command, "--lake", str(lake)],
        capture_output=True, text=True, check=False, env=environment(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "root:x:0:0" not in done.stdout + done.stderr
    if command[0] == "timeline":  # the fleet view reads no `runs` (its one SQL pass needs none)
        assert "passwd.parquet: a symbolic link (to /etc/passwd)" in done.stderr
    if len(command) != 3:
        assert "odd.parquet: column types differ from planshift's: run_id is VARCHAR" in done.stderr
    assert "notes.parquet: not a Parquet file" in done.stderr
    assert "orders" in done.stdout


def test_lake_connections_reach_nothing_outside_the_lake(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    outside = tmp_path / "outside.csv"
    outside.write_text("a\n1\n")
    with lake_connection([lake]) as con:
        con.execute(f"COPY (SELECT 1 AS a) TO '{lake / 'x.parquet'}' (FORMAT parquet)")
        assert con.execute(f"SELECT a FROM '{lake / 'x.parquet'}'").fetchall() == [(1,)]
        for statement in (
            f"SELECT * FROM read_csv('{outside}')",
            "SELECT * FROM read_csv('/etc/passwd')",
            f"COPY (SELECT 1) TO '{tmp_path / 'y.csv'}'",
            "INSTALL sqlite",
            "LOAD httpfs",
            "SET enable_external_access = true",
            f"SET allowed_directories = ['{tmp_path}/']",
        ):
            with pytest.raises(duckdb.Error):
                con.execute(statement)
    assert not (tmp_path / "y.csv").exists()
