"""planshift's sessions on a server: how a workload statement is sent so it cannot escape.

Every workload statement goes through `one_statement`: psycopg's pipeline mode sends it with the
extended query protocol, which refuses several commands in one string, so `SELECT 1; COMMIT;
DELETE ...` is an error instead of a commit. A measured execution is one pipeline, one round
trip: BEGIN, the side's settings by `set_config(name, value, true)`, the EXPLAIN, ROLLBACK, and
the release of any session-level advisory lock the statement took.
After each query, `reset_session` checks that nothing survived the rollback (a session-level
setting) and clears what may have (advisory locks, prepared statements) with DISCARD ALL.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import pq
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
    """Run one statement in a transaction that is rolled back; (first column of the first row,
    or with first_value=False the number of rows fetched; wall milliseconds of the round trip).

    `params` None sends the SQL as written (a literal `%` stays a `%`); with a mapping, psycopg
    merges `%(name)s` values client-side, as literals, so the planner sees what a client's query
    text would show it.
    """
    settings = dict(gucs or {})
    setters = ", ".join("set_config(%s, %s, true)" for _ in settings)
    flat = [item for pair in settings.items() for item in pair]
    statement, control = conn.cursor(), conn.cursor()
    started = time.perf_counter()
    try:
        # one Sync, one round trip: psycopg's transaction() would sync on entering and leaving
        with conn.pipeline():
            control.execute("BEGIN")
            if settings:
                control.execute(f"SELECT {setters}", flat)
            statement.execute(sql, params)
            control.execute("ROLLBACK")
            # session-level advisory locks outlive ROLLBACK; another side's session would wait
            control.execute("SELECT pg_advisory_unlock_all()")
    except BaseException:
        # the error skipped the rest of the pipeline: the transaction is open and failed
        if not conn.closed:
            if conn.info.transaction_status != pq.TransactionStatus.IDLE:
                conn.execute("ROLLBACK")
            conn.execute("SELECT pg_advisory_unlock_all()")
        raise
    # the pipeline's end waited for every result, the statement's rows included
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    if not first_value:
        return len(statement.fetchall()) if statement.description is not None else 0, elapsed_ms
    row = statement.fetchone()
    if row is None:
        raise PlanshiftError("the statement returned no row", f"statement: {sql[:200]}")
    return row[0], elapsed_ms


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
