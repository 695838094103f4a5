"""planshift's sessions on a server: how a workload statement is sent so it cannot escape.

Every workload statement goes through `one_statement`: libpq's pipeline mode sends it with the
extended query protocol, which refuses several commands in one string, so `SELECT 1; COMMIT;
DELETE ...` is an error instead of a commit. A measured execution is one pipeline, one round
trip: BEGIN, the side's settings by `set_config(name, value, true)`, the EXPLAIN, ROLLBACK, and
the release of any session-level advisory lock the statement took. If the wait for its results
is interrupted, the session is closed: the server then rolls back and releases everything.
After each query, `reset_session` checks that nothing survived the rollback (a session-level
setting) and clears what may have (advisory locks, prepared statements) with DISCARD ALL.
"""

from __future__ import annotations

import select
import time
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

    The five statements go straight to libpq's pipeline (one write, one Sync, one wait for the
    results): psycopg's cursors flush and poll once per statement, which on a loaded machine
    costs a third or more of the executions per second (bench/bench_overhead.py measures both).
    """
    text = sql if params is None else ClientCursor(conn).mogrify(sql, params)
    settings = [value.encode() for pair in (gucs or {}).items() for value in pair]
    setters = ", ".join(f"set_config(${i}, ${i + 1}, true)" for i in range(1, len(settings), 2))
    encoding = conn.info.encoding
    statements: list[tuple[bytes, list[bytes] | None]] = [(b"BEGIN", None)]
    if settings:
        statements.append((f"SELECT {setters}".encode(), list(settings)))
    measured = len(statements)
    statements += [(text.encode(encoding), None), (b"ROLLBACK", None), (_UNLOCK, None)]
    with conn.lock:
        started = time.perf_counter()
        results = _pipeline(conn, statements)
        elapsed_ms = (time.perf_counter() - started) * 1000.0
    failed = next((r for r in results if r.status == pq.ExecStatus.FATAL_ERROR), None)
    if failed is not None:
        # the error skipped the rest of the pipeline: the transaction is open and failed
        if conn.info.transaction_status != pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
        conn.execute("SELECT pg_advisory_unlock_all()")
        raise error_from_result(failed, encoding)
    statement = results[measured]
    if not first_value:
        return statement.ntuples, elapsed_ms
    if statement.ntuples == 0 or statement.nfields == 0:
        raise PlanshiftError("the statement returned no row", f"statement: {sql[:200]}")
    value = statement.get_value(0, 0)
    return (None if value is None else value.decode(encoding)), elapsed_ms


# session-level advisory locks outlive ROLLBACK; another session would wait on them
_UNLOCK = b"SELECT pg_advisory_unlock_all()"


def _pipeline(
    conn: psycopg.Connection[Any], statements: list[tuple[bytes, list[bytes] | None]]
) -> list[pq.abc.PGresult]:
    """Each statement's result, sent in one pipeline (extended protocol: one command per
    statement) with one Sync. Anything going wrong mid-way (a signal) closes the session,
    which rolls back its transaction and releases its locks."""
    pg = conn.pgconn
    pg.enter_pipeline_mode()
    try:
        for query, values in statements:
            pg.send_query_params(query, values)
        pg.pipeline_sync()
        while pg.flush():
            select.select([], [pg.socket], [])
        results: list[pq.abc.PGresult] = []
        while True:
            while pg.is_busy():
                select.select([pg.socket], [], [])
                pg.consume_input()
            result = pg.get_result()
            if result is None:
                continue
            if result.status == pq.ExecStatus.PIPELINE_SYNC:
                break
            results.append(result)
        pg.exit_pipeline_mode()
    except BaseException:
        conn.close()
        raise
    return results


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
