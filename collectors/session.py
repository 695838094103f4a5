"""planshift's sessions on a server: how a workload statement is sent so it cannot escape.

Every workload statement goes through `one_statement`: libpq's pipeline mode sends it with the
extended query protocol, which refuses several commands in one string, so `SELECT 1; COMMIT;
DELETE ...` is an error instead of a commit. A measured execution is one pipeline with one
Sync: BEGIN, the side's settings by `set_config(name, value, true)` (with the release of any
session-level advisory lock the previous statement took), the statement, ROLLBACK; all but the
statement are prepared once per session. If the statement fails, the transaction is rolled
back and the locks released before its error is raised, so the session is as it was (the runner
records the failure and goes on, collectors/failures.py); settings the server refuses raise
`SettingsRefused` instead. If the wait for its results is interrupted, the session is closed:
the server then rolls back and releases everything. After each query,
`reset_session` checks that nothing survived the rollback (a session-level setting) and clears
what may have (advisory locks, prepared statements, temporary state) with DISCARD ALL.
"""

from __future__ import annotations

import select
import time
import weakref
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import ClientCursor, pq
from psycopg.errors import error_from_result
from psycopg.types.string import TextLoader

from collectors.servers.targets import Server, redact_secrets
from detector.errors import PlanshiftError

APPLICATION_NAME = "planshift"
# settings a client sets when it connects (application_name, client_encoding, DateStyle ...) have
# source 'client'; 'session' means a SET (or set_config(..., false)) that outlived its transaction
LEAKED_SETTINGS = "SELECT name, setting FROM pg_settings WHERE source = 'session' ORDER BY name"


class SettingsRefused(psycopg.Error):
    """The server refused an execution's settings (its set_config), not its statement: the
    same settings would fail every statement of that side. It carries the server's error."""


def connect(server: Server) -> psycopg.Connection[Any]:
    """An autocommit session named `planshift` (so a DBA sees it in pg_stat_activity)."""
    try:
        conn = psycopg.connect(
            server.conninfo,
            autocommit=True,
            cursor_factory=psycopg.ClientCursor,
            application_name=APPLICATION_NAME,
        )
    except psycopg.Error as exc:
        message = redact_secrets(str(exc).strip(), server.conninfo)
        raise PlanshiftError(
            f"cannot connect to target {server.name} ({server.redacted}): {message}",
            "check the DSN; put passwords in PGPASSWORD or ~/.pgpass, not on the command line",
        ) from exc
    conn.adapters.register_loader("json", TextLoader)
    return conn


def one_statement(
    conn: psycopg.Connection[Any],
    sql: str,
    params: Mapping[str, Any] | None = None,
    gucs: Mapping[str, str] | None = None,
    first_value: bool = True,
) -> tuple[Any, float]:
    """Run one statement in a transaction that is rolled back; (first column of the first row as
    text, or with first_value=False the number of rows fetched; wall ms of the round trip).

    `params` None sends the SQL as written (a literal `%` stays a `%`); with a mapping, psycopg
    merges `%(name)s` values client-side, as literals, so the planner sees what a client's query
    text would show it.

    Four statements, one Sync, one round trip: BEGIN, the settings, the statement, ROLLBACK.
    A session-level advisory lock the statement takes outlives ROLLBACK; the settings statement
    of the session's next execution releases it first (`pg_advisory_unlock_all()`), and so do
    reset_session and closing, so no statement ever runs with a lock an earlier one took; in
    between, another session could wait on it. All but the statement are prepared once per
    session (sent unprepared, they ran at 59% of the prepared rate; the release in a statement
    of its own after ROLLBACK cost 10% of the executions per second). Executions are not
    pipelined one after another: sent while the previous one ran, the backend never waits
    between them and, on a loaded machine, was descheduled mid-execution in 14% of A/A pairs
    instead of 10.5% (bench_detection, alternating both ways), for 8% more executions per second
    in the bench's runs."""
    text = sql if params is None else ClientCursor(conn).mogrify(sql, params)
    state = _session_state(conn)
    setter, settings = state.setter(conn, gucs or {})
    with conn.lock:
        started = time.perf_counter()
        statement = _pipeline(conn, setter, settings, text.encode(state.encoding))
        elapsed_ms = (time.perf_counter() - started) * 1000.0
    if not first_value:
        return statement.ntuples, elapsed_ms
    if statement.ntuples == 0 or statement.nfields == 0:
        raise PlanshiftError("the statement returned no row", f"statement: {sql[:200]}")
    value = statement.get_value(0, 0)
    return (None if value is None else value.decode(state.encoding)), elapsed_ms


_BEGIN, _ROLLBACK = b"planshift_begin", b"planshift_rollback"
_CONTROL = {_BEGIN: b"BEGIN", _ROLLBACK: b"ROLLBACK"}
_SYNC, _FATAL = int(pq.ExecStatus.PIPELINE_SYNC), int(pq.ExecStatus.FATAL_ERROR)
MEASURED = 2  # the position of the statement among an execution's four


class _SessionState:
    """What one session has prepared, its encoding, and each settings mapping as the setter's
    name and encoded parameters (computed once: this is on the path of every execution)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.encoding = conn.info.encoding
        self.prepared: set[bytes] = set()
        self.setters: dict[tuple[tuple[str, str], ...], tuple[bytes, list[bytes]]] = {}

    def setter(
        self, conn: psycopg.Connection[Any], gucs: Mapping[str, str]
    ) -> tuple[bytes, list[bytes]]:
        key = tuple(gucs.items())
        known = self.setters.get(key)
        if known is None:
            values = [value.encode(self.encoding) for pair in key for value in pair]
            known = self.setters[key] = (self._prepare(conn, len(key)), values)
        return known

    def _prepare(self, conn: psycopg.Connection[Any], settings: int) -> bytes:
        """Prepare the control statements and the setter of `settings` settings; its name."""
        setter = b"planshift_set%d" % settings
        # session-level advisory locks outlive ROLLBACK: the previous statement's go first
        calls = ["pg_advisory_unlock_all()"]
        calls += [f"set_config(${i}, ${i + 1}, true)" for i in range(1, 2 * settings, 2)]
        wanted = {**_CONTROL, setter: f"SELECT {', '.join(calls)}".encode()}
        with conn.lock:
            for name, sql in wanted.items():
                if name not in self.prepared:
                    result = conn.pgconn.prepare(name, sql)
                    if result.status != pq.ExecStatus.COMMAND_OK:
                        raise error_from_result(result, self.encoding)
                    self.prepared.add(name)
        return setter


# per session (DISCARD ALL in reset_session drops its prepared statements, and this with them)
_STATES: weakref.WeakKeyDictionary[psycopg.Connection[Any], _SessionState] = (
    weakref.WeakKeyDictionary()
)


def _session_state(conn: psycopg.Connection[Any]) -> _SessionState:
    state = _STATES.get(conn)
    if state is None:
        state = _STATES[conn] = _SessionState(conn)
    return state


def _pipeline(
    conn: psycopg.Connection[Any], setter: bytes, settings: list[bytes], statement: bytes
) -> pq.abc.PGresult:
    """The statement's result, sent in one pipeline (extended protocol: one command per
    statement) between BEGIN and the setter before it and ROLLBACK after it, with one Sync.
    Anything going wrong mid-way (a signal) closes the session, which rolls back its
    transaction and releases its locks. The caller holds the session's lock."""
    pg = conn.pgconn
    pg.enter_pipeline_mode()
    try:
        pg.send_query_prepared(_BEGIN, None)
        pg.send_query_prepared(setter, settings)
        pg.send_query_params(statement, None)
        pg.send_query_prepared(_ROLLBACK, None)
        pg.pipeline_sync()
        while pg.flush():
            select.select([], [pg.socket], [])
        results: list[pq.abc.PGresult] = []
        failed, position = None, MEASURED
        while True:
            while pg.is_busy():
                select.select([pg.socket], [], [])
                pg.consume_input()
            result = pg.get_result()
            if result is None:
                continue
            status = result.status
            if status == _SYNC:
                break
            if status == _FATAL and failed is None:
                failed, position = result, len(results)  # the rest of the pipeline is skipped
            results.append(result)
        pg.exit_pipeline_mode()
    except BaseException:
        conn.close()
        raise
    if failed is not None:
        # the transaction is open and failed: after these the session is as before the pipeline
        if pg.transaction_status != pq.TransactionStatus.IDLE:
            _control(conn, b"ROLLBACK")
        _control(conn, b"SELECT pg_advisory_unlock_all()")
        error = error_from_result(failed, conn.info.encoding)
        if position != MEASURED:
            raise SettingsRefused(str(error), info=failed, encoding=conn.info.encoding)
        raise error
    return results[MEASURED]


def _control(conn: psycopg.Connection[Any], sql: bytes) -> None:
    """Run a control statement on a session whose lock the caller holds."""
    result = conn.pgconn.exec_(sql)
    if result.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
        raise error_from_result(result, conn.info.encoding)


def reset_session(conn: psycopg.Connection[Any], where: str) -> None:
    """Fail if a setting outlived the rolled-back transaction, then DISCARD ALL."""
    rows = conn.execute(LEAKED_SETTINGS).fetchall()
    if rows:
        shown = ", ".join(f"{name}={setting}" for name, setting in rows)
        raise PlanshiftError(
            f"{where} left session settings behind ({shown}): later measurements would not run "
            "with the declared settings",
            "a workload query must not change session state; remove the SET or set_config",
        )
    conn.execute("DISCARD ALL")
    _STATES.pop(conn, None)
