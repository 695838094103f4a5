"""A workload statement that failed: the query's fault (recorded, the run goes on) or the
server's (the run ends).

PostgreSQL answers a statement it refuses with an ERROR and the session lives on: a column
renamed in 17 (42703), a function removed (42883), a division by zero for some parameter values
(22012), a statement timeout (57014). Those are facts about the query on that target:
`FailureTracker.failed` records them as `QueryFailure`s. What is the server's fault ends the
run instead (`ServerFailure`): the session is gone (a crash, pg_terminate_backend, a shutdown, a
lost network), or the error's class says the server, not the statement, is in trouble: 08
connection exception, 53 insufficient resources (disk full, out of memory, too many
connections), 57P operator intervention (admin or crash shutdown), 58 system error (I/O), F0
configuration file error, XX001/XX002 data or index corrupted.

A side stops executing a query (at one sweep point) once every execution of it there failed
and there were `GIVE_UP_AFTER` of them (one for a statement without parameters: the same text
fails the same way every time), or after `MAX_TIMEOUTS` statement timeouts in a row (each one
costs the whole timeout); the other sides go on, and so does the side with the next query.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg

from collectors.logs.redact import REDACTED, redact_message, sets_password
from collectors.servers.targets import redact_secrets
from collectors.sides import LiveSide
from detector.errors import PlanshiftError
from detector.model.failures import QueryFailure
from detector.model.rows import find_password
from detector.model.workload import Query

SERVER_CLASSES = ("08", "53", "57P", "58", "F0", "XX001", "XX002")
QUERY_CANCELED = "57014"  # statement_timeout (or a cancel request)
GIVE_UP_AFTER = 5  # failed executions, none succeeded, of a query with parameters
MAX_TIMEOUTS = 3  # statement timeouts in a row
SERVER_HINT = (
    "the server's fault, not the query's: its session was ended (a crash, a shutdown, "
    "pg_terminate_backend, a lost connection) or it ran out of a resource (disk, memory, "
    "connections); see the server's log"
)


class ServerFailure(PlanshiftError):
    """The server, not the query, failed: the run ends, kept in the store marked failed."""


def is_servers_fault(exc: psycopg.Error, conn: psycopg.Connection[Any]) -> bool:
    """The session is gone, or the SQLSTATE's class is about the server, not the statement."""
    if conn.closed or conn.broken:
        return True
    state = exc.sqlstate
    return state is not None and state.startswith(SERVER_CLASSES)


def server_failure(exc: psycopg.Error, name: str, conninfo: str, where: str) -> ServerFailure:
    """`pg17 failed during query q (measurement, sample 4): ...`, without the DSN's password."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if exc.sqlstate:
        text = f"{exc.diag.severity or 'ERROR'} {exc.sqlstate} {text}"
    text = redact_secrets(text, conninfo)
    return ServerFailure(f"{name} failed {where}: {text}", SERVER_HINT)


class FailureTracker:
    """One query's failed executions at one sweep point, per side: recorded, and when a side
    stops trying it (see the module's docstring)."""

    def __init__(self, query: Query, key: str, point: str | None) -> None:
        self.query, self.key, self.point = query, key, point
        self.limit = GIVE_UP_AFTER if query.placeholders else 1
        self.failures: list[QueryFailure] = []
        self._failed: Counter[int] = Counter()
        self._timeouts: Counter[int] = Counter()
        self._worked: set[int] = set()
        self._secret = sets_password(query.sql)
        self._scrub: Callable[[str], str] = redact_message if self._secret else _unchanged

    def stopped(self, side: LiveSide) -> bool:
        """Whether this side no longer executes the query (its executions are skipped)."""
        mine = id(side)
        never = mine not in self._worked and self._failed[mine] >= self.limit
        return never or self._timeouts[mine] >= MAX_TIMEOUTS

    def worked(self, side: LiveSide) -> None:
        self._worked.add(id(side))
        self._timeouts[id(side)] = 0

    def failed(
        self,
        exc: psycopg.Error,
        side: LiveSide,
        sample_index: int,
        phase: str,
        params: dict[str, Any],
    ) -> None:
        """Record the failure, or raise ServerFailure when it is the server's fault (and a
        PlanshiftError when it is not PostgreSQL's error at all)."""
        where = f"during query {self.query.name}"
        where += f" [{self.point}]" if self.point else ""
        where += f" ({phase}, sample {sample_index})"
        if is_servers_fault(exc, side.connection):
            raise server_failure(exc, side.name, side.server.conninfo, where) from exc
        if exc.sqlstate is None:  # raised by the client (psycopg), not by the server
            message = redact_secrets(str(exc).strip(), side.server.conninfo)
            raise PlanshiftError(
                f"query {self.query.name} failed on {side.name}: {message}",
                f"parameters: {json.dumps(params, default=str)}",
            ) from exc
        self._failed[id(side)] += 1
        if exc.sqlstate == QUERY_CANCELED:
            self._timeouts[id(side)] += 1
        else:
            self._timeouts[id(side)] = 0
        diag = exc.diag
        self.failures.append(
            QueryFailure(
                target_id=side.target_id,
                query_key=self.key,
                point=self.point,
                sample_index=sample_index,
                phase=phase,
                params=self._params(params, side),
                sqlstate=exc.sqlstate,
                message=self._clean(diag.message_primary or str(exc), side) or "",
                detail=self._clean(diag.message_detail, side),
                hint=self._clean(diag.message_hint, side),
                failed_at=datetime.now(UTC),
            )
        )

    def _params(self, params: dict[str, Any], side: LiveSide) -> str:
        """The parameters as JSON, as observations store them; a JSON string saying they were
        redacted when they may hold a password."""
        text = redact_secrets(json.dumps(params, sort_keys=True, default=str), side.server.conninfo)
        if self._secret or find_password(text, "") is not None:
            return json.dumps(REDACTED)
        return text

    def _clean(self, text: str | None, side: LiveSide) -> str | None:
        """PostgreSQL's text without a password: the DSN's, any `password=...` or `user:...@`
        pattern, the constants of a statement that sets one; cut after the word when a
        password pattern survives that."""
        if text is None:
            return None
        cleaned = self._scrub(redact_secrets(text.strip(), side.server.conninfo))
        return redact_message(cleaned) if find_password(cleaned, "") is not None else cleaned


def _unchanged(text: str) -> str:
    return text
