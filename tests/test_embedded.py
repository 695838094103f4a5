"""Embedded clusters on real PostgreSQL: lifecycle, settings in effect, failures, crash cleanup."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from collectors.servers.embedded import (
    DEFAULT_INITDB_OPTIONS,
    EmbeddedCluster,
    process_alive,
    read_pid,
    reap_orphans,
)
from collectors.servers.installations import Installation, find_installation
from detector.errors import PlanshiftError

REPO_ROOT = Path(__file__).resolve().parent.parent
FreshDb = Callable[[EmbeddedCluster], str]


@pytest.fixture
def base_dir() -> Iterator[Path]:
    """A cluster base dir the unprivileged server user can reach (pytest's tmp_path is 0700)."""
    parent = Path(tempfile.mkdtemp(prefix="planshift-test-"))
    parent.chmod(0o755)
    yield parent / "clusters"
    reap_orphans(parent / "clusters")
    shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def pg15_install() -> Installation:
    return find_installation(15)


def _show(conninfo: str, name: str) -> str:
    with psycopg.connect(conninfo) as conn:
        row = conn.execute("SELECT current_setting(%s)", [name]).fetchone()
    assert row is not None
    return str(row[0])


def _postmaster_pid(cluster: EmbeddedCluster) -> int:
    pid = read_pid(cluster.data_dir / "postmaster.pid")
    assert pid is not None
    return pid


def test_query_and_version(pg_any: EmbeddedCluster) -> None:
    with psycopg.connect(pg_any.conninfo) as conn:
        query = "SELECT version(), current_setting('server_version_num')::int"
        row = conn.execute(query).fetchone()
    assert row is not None
    assert row[0].startswith(f"PostgreSQL {pg_any.installation.version}")
    assert row[1] == pg_any.installation.version_num


def test_settings_in_effect(pg_any: EmbeddedCluster) -> None:
    conninfo = pg_any.conninfo
    assert _show(conninfo, "shared_preload_libraries") == "auto_explain,pg_stat_statements"
    assert _show(conninfo, "compute_query_id") == "on"
    assert _show(conninfo, "listen_addresses") == ""
    assert _show(conninfo, "unix_socket_directories") == str(pg_any.socket_dir)
    assert _show(conninfo, "port") == "5432"
    assert _show(conninfo, "max_connections") == "30"
    for name in ("fsync", "full_page_writes", "data_checksums"):
        assert _show(conninfo, name) == "off", name
    assert _show(conninfo, "synchronous_commit") == "on"
    assert pg_any.server_settings["compute_query_id"] == "on"
    assert pg_any.initdb_options[: len(DEFAULT_INITDB_OPTIONS)] == DEFAULT_INITDB_OPTIONS
    assert ("--no-data-checksums" in pg_any.initdb_options) == (pg_any.installation.major >= 18)


def test_extensions_usable(pg_any: EmbeddedCluster, fresh_db: FreshDb) -> None:
    conninfo = fresh_db(pg_any)
    with psycopg.connect(conninfo) as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
        conn.execute("SELECT 1")
        row = conn.execute("SELECT count(*) FROM pg_stat_statements").fetchone()
        assert row is not None and row[0] >= 1
        assert conn.execute("SHOW auto_explain.log_min_duration").fetchone() == ("-1",)


def test_contrib_linking_libpq_loads_the_installations_own_libpq(
    pg_any: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    """dblink links libpq: a server must load its own (17's dblink needs PQcancelStart, which
    an older system libpq lacks), and a query through it must work."""
    conninfo = fresh_db(pg_any)
    with psycopg.connect(conninfo) as conn:
        conn.execute("CREATE EXTENSION dblink")
        row = conn.execute(
            "SELECT v FROM dblink(%s, 'SELECT 41 + 1') AS t(v int)", [pg_any.conninfo]
        ).fetchone()
    assert row == (42,)


def test_vacuum_right_after_load_sets_visibility_map(
    pg_any: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    """With synchronous_commit off this fails: index-only scans would need heap fetches."""
    with psycopg.connect(fresh_db(pg_any), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, pad text)")
        conn.execute("INSERT INTO t SELECT i, 'x' FROM generate_series(1, 20000) i")
        conn.execute("VACUUM t")
        row = conn.execute("SELECT relallvisible, relpages FROM pg_class WHERE relname = 't'")
        visible, pages = row.fetchone() or (0, 0)
    assert pages > 0 and visible == pages


def test_server_runs_unprivileged(pg_any: EmbeddedCluster) -> None:
    owner = pg_any.data_dir.stat().st_uid
    postmaster_uid = os.stat(f"/proc/{_postmaster_pid(pg_any)}").st_uid
    assert postmaster_uid == owner
    if os.geteuid() == 0:
        assert owner != 0


def test_fresh_db_is_separate(pg15: EmbeddedCluster, fresh_db: FreshDb) -> None:
    first, second = fresh_db(pg15), fresh_db(pg15)
    with psycopg.connect(first) as conn:
        conn.execute("CREATE TABLE only_here (x int)")
    with psycopg.connect(second) as conn:
        row = conn.execute("SELECT to_regclass('only_here') IS NULL").fetchone()
    assert row == (True,)


@pytest.mark.pg
def test_lifecycle_stop_removes_dir(pg15_install: Installation, base_dir: Path) -> None:
    cluster = EmbeddedCluster(pg15_install, base_dir=base_dir)
    cluster.start()
    assert base_dir.stat().st_mode & 0o7777 == 0o1777
    assert read_pid(cluster.socket_dir / "owner.pid") == os.getpid()
    pid = _postmaster_pid(cluster)
    assert process_alive(pid) and cluster.running
    cluster.stop()
    assert not cluster.running
    assert not process_alive(pid)
    assert cluster.cluster_dir is not None and not cluster.cluster_dir.exists()
    cluster.stop()  # idempotent


@pytest.mark.pg
def test_context_manager_and_caller_settings(pg15_install: Installation, base_dir: Path) -> None:
    settings = {"work_mem": "7MB", "max_connections": "12", "application_name": "it's mine"}
    with EmbeddedCluster(pg15_install, base_dir=base_dir, settings=settings, name="ctx") as cluster:
        assert cluster.socket_dir.name.startswith("ctx-")
        assert _show(cluster.conninfo, "work_mem") == "7MB"
        assert _show(cluster.conninfo, "max_connections") == "12"
        assert _show(cluster.conninfo, "application_name") == "it's mine"
        assert cluster.server_settings["max_connections"] == "12"
        cluster_dir = cluster.socket_dir
    assert not cluster_dir.exists()


@pytest.mark.pg
def test_keep_true_keeps_dir(pg15_install: Installation, base_dir: Path) -> None:
    cluster = EmbeddedCluster(pg15_install, base_dir=base_dir, keep=True)
    cluster.start()
    pid = _postmaster_pid(cluster)
    cluster.stop()
    assert not process_alive(pid)
    assert (cluster.data_dir / "PG_VERSION").read_text().strip() == "15"
    assert reap_orphans(base_dir) == 0
    assert cluster.data_dir.exists()


@pytest.mark.pg
def test_start_failure_reports_log_tail(pg15_install: Installation, base_dir: Path) -> None:
    cluster = EmbeddedCluster(pg15_install, base_dir=base_dir, settings={"shared_buffers": "lots"})
    expected = 'invalid value for parameter "shared_buffers"'
    with pytest.raises(PlanshiftError, match=expected) as info:
        cluster.start()
    assert "server log (tail)" in info.value.message
    assert not cluster.running
    assert list(base_dir.iterdir()) == []


@pytest.mark.pg
def test_socket_path_too_long(pg15_install: Installation, base_dir: Path) -> None:
    cluster = EmbeddedCluster(pg15_install, base_dir=base_dir / ("x" * 90))
    with pytest.raises(PlanshiftError, match="unix socket path too long"):
        cluster.start()


_CRASHING_OWNER = """
import sys, time
from pathlib import Path
from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.installations import find_installation
cluster = EmbeddedCluster(find_installation(15), base_dir=Path(sys.argv[1]))
cluster.start()
print(cluster.data_dir, flush=True)
time.sleep(600)
"""


@pytest.mark.pg
def test_reap_orphans_after_owner_is_killed(base_dir: Path) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", _CRASHING_OWNER, str(base_dir)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=dict(os.environ),  # the installed planshift (conftest: PYTHONSAFEPATH)
    )
    assert owner.stdout is not None
    data_dir = Path(owner.stdout.readline().strip())
    postmaster = read_pid(data_dir / "postmaster.pid")
    assert postmaster is not None
    owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=10)
    assert process_alive(postmaster), "the postmaster outlives its owner"
    assert reap_orphans(base_dir) == 1
    assert not process_alive(postmaster)
    assert not data_dir.parent.exists()
    assert reap_orphans(base_dir) == 0


@pytest.mark.pg
def test_reap_orphans_leaves_live_clusters(pg15_install: Installation, base_dir: Path) -> None:
    with EmbeddedCluster(pg15_install, base_dir=base_dir) as cluster:
        assert reap_orphans(base_dir) == 0
        assert _show(cluster.conninfo, "port") == "5432"
    assert reap_orphans(base_dir / "missing") == 0


_EXITING_OWNER = """
import sys
from pathlib import Path
from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.installations import find_installation
cluster = EmbeddedCluster(find_installation(15), base_dir=Path(sys.argv[1]))
cluster.start()
print(cluster.data_dir / "postmaster.pid", flush=True)
print(open(cluster.data_dir / "postmaster.pid").readline().strip(), flush=True)
"""


@pytest.mark.pg
def test_cluster_stopped_at_interpreter_exit(base_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _EXITING_OWNER, str(base_dir)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=dict(os.environ),  # the installed planshift (conftest: PYTHONSAFEPATH)
        timeout=60,
        check=True,
    )
    pid_file, pid = done.stdout.split()
    assert not process_alive(int(pid))
    assert not Path(pid_file).parent.parent.exists()


@pytest.mark.pg
@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the server to another user")
def test_bindir_the_server_user_cannot_reach(pg15_install: Installation) -> None:
    private = Path(tempfile.mkdtemp(prefix="planshift-private-"))  # mode 0700, owned by root
    try:
        (private / "bin").symlink_to(pg15_install.bindir)
        hidden = dataclasses.replace(pg15_install, bindir=private / "bin")
        with pytest.raises(PlanshiftError, match="cannot run") as info:
            EmbeddedCluster(hidden).start()
        assert info.value.hint and "not under /root" in info.value.hint
    finally:
        shutil.rmtree(private)


_KEEPING_OWNER = """
import sys
from pathlib import Path
from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.installations import find_installation
cluster = EmbeddedCluster(find_installation(15), base_dir=Path(sys.argv[1]), keep=True)
cluster.start()
cluster.stop()
print(cluster.cluster_dir, flush=True)
"""


@pytest.mark.pg
def test_servers_lists_orphans_and_clean_removes_only_them() -> None:
    """`planshift servers` shows the clusters of its base directory (<TMPDIR>/planshift-clusters,
    private here: another cluster's start would reap the orphan); `--clean` stops and removes
    the orphans (owner killed), not a kept cluster nor a directory planshift did not make."""
    tmp = Path(tempfile.mkdtemp(prefix="planshift-tmpdir-"))
    tmp.chmod(0o755)
    base = tmp / "planshift-clusters"
    env = {**os.environ, "TMPDIR": str(tmp)}  # the installed planshift (conftest: PYTHONSAFEPATH)
    kept = Path(
        subprocess.run(
            [sys.executable, "-c", _KEEPING_OWNER, str(base)],
            capture_output=True, text=True, env=env, timeout=120, check=True,
        ).stdout.strip()
    )  # fmt: skip
    owner = subprocess.Popen(
        [sys.executable, "-c", _CRASHING_OWNER, str(base)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert owner.stdout is not None
    orphan = Path(owner.stdout.readline().strip()).parent
    owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=10)
    foreign = Path(tempfile.mkdtemp(prefix="not-planshift-", dir=base))

    def planshift(*args: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "detector", "servers", *args],
            capture_output=True, text=True, env=env, timeout=120, check=True,
        ).stdout  # fmt: skip

    try:
        postmaster = read_pid(orphan / "data" / "postmaster.pid")
        assert postmaster is not None and process_alive(postmaster)
        states = {c["path"]: c for c in json.loads(planshift("--format", "json"))["clusters"]}
        assert set(states) == {str(orphan), str(kept)}, "only the directories planshift made"
        assert states[str(orphan)]["state"] == "orphan"
        assert states[str(orphan)]["postmaster_pid"] == postmaster
        assert states[str(kept)]["state"] == "kept" and states[str(kept)]["postmaster_pid"] is None
        shown = planshift()
        assert (
            f"cluster {orphan}: orphan: its planshift process died, server pid {postmaster}"
            in shown
        )
        assert f"cluster {kept}: kept (--keep)" in shown
        assert "remove the orphans with: planshift servers --clean" in shown
        cleaned = planshift("--clean")
        assert f"removed {orphan} (owner pid {owner.pid} had died)" in cleaned
        assert not process_alive(postmaster)
        assert not orphan.exists() and kept.exists() and foreign.exists()
    finally:
        reap_orphans(base)
        shutil.rmtree(tmp, ignore_errors=True)
