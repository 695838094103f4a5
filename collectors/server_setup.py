"""A workload's setup on its servers: run on embedded clusters, only checked on --dsn ones.

Setup on a server someone else runs (a `--dsn` target) needs the consent of the person running
the command: `--setup`, or PLANSHIFT_ALLOW_SETUP=1 in the environment of a CI job (set by whoever
writes the pipeline, not by the workload it runs). The workload file cannot consent for itself:
`[setup] on_dsn = "run"` only says that the setup is meant to run there, so without consent the
run is refused before anything is written, instead of checking that the tables exist.

The servers that run the setup load it at the same time, one session (and thread) each: a
restore is I/O and server work, and measured on two cores three clusters loaded together in
about the time of the slowest alone (bench/bench_capture.py). Setup files are streamed
(collectors/setup_files.py: statements one at a time, COPY rows in blocks), so memory stays
flat in the size of the dump; progress says the bytes and rows read per server. The
workload's [settings] each server takes (collectors/setup_settings.py) are set in its setup
session too, so ANALYZE samples with production's `default_statistics_target`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from collectors.servers.targets import Server
from collectors.session import connect
from collectors.setup_files import SetupFile, SetupStatement
from collectors.setup_settings import ServerSettings, server_settings
from detector.errors import PlanshiftError
from detector.model.statements import setup_relations
from detector.model.workload import TargetSpec, Workload

Progress = Callable[[str, int], None]
REPORT_EVERY_S = 10.0
CONSENT_VARIABLE = "PLANSHIFT_ALLOW_SETUP"


def setup_consent(flag: bool) -> bool:
    """--setup on the command line, or PLANSHIFT_ALLOW_SETUP=1 (CI)."""
    return flag or os.environ.get(CONSENT_VARIABLE, "") == "1"


def check_setup_consent(workload: Workload, specs: Sequence[TargetSpec], consent: bool) -> None:
    """Refuse a workload whose file asks for setup on --dsn targets the user did not consent to
    (before a store or a server is touched)."""
    if consent or not workload.setup_on_dsn:
        return
    has_setup = workload.setup or workload.setup_files
    servers = [s.name for s in specs if s.postgres is None and (has_setup or s.setup)]
    if servers:
        raise refusal(workload, ", ".join(servers))


def refusal(workload: Workload, servers: str) -> PlanshiftError:
    files = f" and {len(workload.setup_files)} files" if workload.setup_files else ""
    return PlanshiftError(
        f"{workload.path.name} asks to run its [setup] ({len(workload.setup)} statements{files}) "
        f'on --dsn target {servers} (on_dsn = "run"); a workload file cannot consent to '
        "changing a server, the person running planshift does",
        f"pass --setup to run it there (in CI: {CONSENT_VARIABLE}=1), or create the tables "
        'yourself and set on_dsn = "check"',
    )


def setup_plan(workload: Workload, server: Server) -> tuple[str, ...]:
    """What will run on `server`: the workload's statements, its files, the target's own."""
    files = (f"file {path.name}" for path in workload.setup_files)
    return (*workload.setup, *files, *server.setup)


def describe_setup(workload: Workload, server: Server) -> str:
    """What setup will run where, said before it runs on a --dsn server."""
    files = ", ".join(path.name for path in workload.setup_files)
    own = f" + {len(server.setup)} of target {server.name}" if server.setup else ""
    return (
        f"setup on {server.name} ({server.redacted}): {len(workload.setup)} statements of "
        f"{workload.path.name} [setup]{f' + files {files}' if files else ''}{own}, "
        "as asked (--setup)"
    )


@dataclass
class Loading:
    """One server's setup as it goes: what the progress lines show."""

    server: Server
    file: SetupFile | None = None
    done_bytes: int = 0  # of files finished
    doing: str = ""  # what it is doing: `COPY public.orders`, `CREATE INDEX orders_date`
    rows: int = 0  # COPY rows of files finished
    seconds: float = 0.0
    finished: bool = False

    @property
    def bytes_read(self) -> int:
        return self.done_bytes + (self.file.bytes_read if self.file else 0)

    @property
    def rows_read(self) -> int:
        return self.rows + (self.file.rows if self.file else 0)


def prepare_servers(
    servers: Sequence[Server],
    workload: Workload,
    run_setup_on_dsn: bool,
    progress: Progress | None = None,
    *,
    parallel: bool = True,
) -> dict[str, dict[str, str]]:
    """Set up every server; returns per server name the workload's [settings] it takes (by
    the name it knows them), also filed in its info (`workload_settings`)."""
    settings: dict[str, ServerSettings] = {}
    loading: list[Loading] = []
    for server in servers:
        with connect(server) as conn:
            settings[server.name] = server_settings(conn, workload.settings)
            if runs_setup(server, workload, run_setup_on_dsn):
                loading.append(Loading(server))
            else:
                check_setup(server, conn, workload)
        server.info["workload_settings"] = settings[server.name].as_info()
    if loading:
        load_all(loading, workload, settings, progress, parallel)
    return {name: found.applied for name, found in settings.items()}


def runs_setup(server: Server, workload: Workload, run_setup_on_dsn: bool) -> bool:
    """Embedded clusters, and --dsn servers with the user's consent; a workload asking for
    setup on a --dsn server without it is refused (its file cannot consent)."""
    if server.source != "dsn" or run_setup_on_dsn:
        return True
    if workload.setup_on_dsn and setup_plan(workload, server):
        raise refusal(workload, server.name)
    return False


def check_setup(server: Server, conn: psycopg.Connection[Any], workload: Workload) -> None:
    """On a --dsn server not set up: the relations the setup would create must be there."""
    statements = [*workload.setup, *_created(workload.setup_files), *server.setup]
    relations = setup_relations(statements)
    if not relations:
        return
    rows = conn.execute(
        "SELECT name FROM unnest(%s::text[]) AS name WHERE to_regclass(name) IS NULL", [relations]
    ).fetchall()
    missing = [str(row[0]) for row in rows]
    if missing:
        raise PlanshiftError(
            f"target {server.name} ({server.redacted}) lacks {', '.join(missing)}, which the "
            "workload's [setup] creates; planshift does not run setup on a --dsn server unasked",
            "create them yourself, or pass --setup to run the workload's setup SQL on that "
            f"server (in CI: {CONSENT_VARIABLE}=1)",
        )


def _created(files: Iterable[Path]) -> Iterable[str]:
    for path in files:
        for statement in SetupFile(path):
            if statement.sql.lstrip()[:6].upper() == "CREATE":
                yield statement.sql


def load_all(
    loading: Sequence[Loading],
    workload: Workload,
    settings: Mapping[str, ServerSettings],
    progress: Progress | None,
    parallel: bool,
) -> None:
    """Run the setup on each server (at the same time when `parallel`), with progress lines
    every REPORT_EVERY_S; the first failure stops the others and is raised."""
    stop = threading.Event()
    errors: list[BaseException] = []  # the first is the cause; the others stopped for it
    guard = threading.Lock()
    names = ", ".join(state.server.name for state in loading)
    total = sum(path.stat().st_size for path in workload.setup_files)
    started = time.monotonic()

    def work(state: Loading) -> None:
        begun = time.monotonic()
        try:
            set_up(state, workload, settings[state.server.name].applied, stop)
        except BaseException as exc:  # handed to the main thread, which raises it
            with guard:
                errors.append(exc)
            stop.set()
        state.seconds = time.monotonic() - begun
        state.finished = True

    groups = [list(loading)] if parallel else [[state] for state in loading]
    try:
        for group in groups:
            threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in group]
            for thread in threads:
                thread.start()
            last = time.monotonic()
            while any(thread.is_alive() for thread in threads):
                for thread in threads:
                    thread.join(timeout=0.2)
                if progress is not None and time.monotonic() - last >= REPORT_EVERY_S and total:
                    last = time.monotonic()
                    progress(f"setting up {names}: {_status(loading, total)}", 0)
            if errors:
                raise errors[0]
    finally:
        stop.set()
    if progress is not None and total:  # a dump was loaded: how long it took
        elapsed = time.monotonic() - started
        each = "; ".join(f"{s.server.name} {s.seconds:.1f} s" for s in loading)
        loaded = f"{_mb(total)} and {loading[0].rows_read:,} rows each"
        progress(f"set up {names} in {elapsed:.1f} s ({each}), {loaded}", 0)


def _status(loading: Sequence[Loading], total: int) -> str:
    parts = []
    for state in loading:
        where = "done" if state.finished else state.doing or "starting"
        parts.append(
            f"{state.server.name} {_mb(state.bytes_read)} of {_mb(total)}, "
            f"{state.rows_read:,} rows ({where})"
        )
    return "; ".join(parts)


def _mb(size: int) -> str:
    return f"{size / 2**20:,.0f} MB"


def set_up(
    state: Loading, workload: Workload, settings: Mapping[str, str], stop: threading.Event
) -> None:
    """The [setup] sql, its files, then the target's own setup, in one session."""
    server = state.server
    with connect(server) as conn:
        for name, value in settings.items():
            conn.execute("SELECT set_config(%s, %s, false)", [name, value])
        run_setup(server, conn, workload.setup)
        for path in workload.setup_files:
            state.file = SetupFile(path)
            for statement in state.file:
                if stop.is_set():
                    raise PlanshiftError(f"setup of {server.name} stopped")
                _run_file_statement(state, conn, statement, stop)
            state.done_bytes += state.file.size
            state.rows += state.file.rows
            state.file = None
        run_setup(server, conn, server.setup)


def _run_file_statement(
    state: Loading,
    conn: psycopg.Connection[Any],
    statement: SetupStatement,
    stop: threading.Event,
) -> None:
    assert state.file is not None
    words = statement.sql.split(None, 4)[:4]
    state.doing = " ".join(words[:2] if statement.copy_rows is not None else words)
    try:
        if statement.copy_rows is None:
            conn.execute(statement.sql.encode())
            return
        with conn.cursor() as cursor, cursor.copy(statement.sql.encode()) as copy:
            for block in statement.copy_rows:
                if stop.is_set():
                    raise PlanshiftError(f"setup of {state.server.name} stopped")
                copy.write(block)
    except psycopg.Error as exc:
        raise PlanshiftError(
            f"{state.file.path.name}:{statement.line} failed on {state.server.name}: "
            f"{str(exc).strip()}",
            f"statement: {statement.sql[:200]}",
        ) from exc


def run_setup(server: Server, conn: psycopg.Connection[Any], statements: Sequence[str]) -> None:
    for index, statement in enumerate(statements):
        try:
            conn.execute(statement.encode())
        except psycopg.Error as exc:
            raise PlanshiftError(
                f"setup statement {index + 1} failed on {server.name}: {str(exc).strip()}",
                f"statement: {statement[:200]}",
            ) from exc
