"""`planshift capture`: read a running system's workload without ever writing to it.

The session is read-only before it reads anything: `default_transaction_read_only`, a
`statement_timeout` and a `lock_timeout` are set for the session (set_config, no SET string),
so every statement planshift sends runs in a read-only transaction that cannot run away or
queue behind a lock; nothing else is sent but SELECTs of catalogs and of pg_stat_statements,
and plain EXPLAINs of the captured queries (`plan_errors`: planned, never executed; on 15 a
generic plan is PREPAREd and DEALLOCATEd). No setup, no extension created: a source without
pg_stat_statements is an error with a hint.

pg_stat_statements gives the statements (constants and bound parameters shown as $n), their
calls and time; each is classified by PostgreSQL's own parser (pglast): a query planshift can
replay, a statement that writes, a utility statement (BEGIN, SET, DDL, VACUUM), or a query on
a relation the capture session cannot see (a temporary table, or one dropped since).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from pglast import ast, parse_sql
from pglast import parser as pg_parser

from collectors.attribution import PLAN_ONLY
from collectors.capture.production_settings import SETTINGS_SQLS
from collectors.capture.relations import RELATIONS_SQL, check_relations, walk
from collectors.counterfactual import MEASURED
from collectors.generic_plans import GENERIC_EXPLAIN, PREPARED_NAME, generic_plan
from collectors.pgss import COLUMNS_SQL, INFO_SQL, VIEW_SQL, read_pgss
from collectors.sampling import EXPLAIN as MEASURED_BY_RUNS
from collectors.servers.targets import check_conninfo, redact_conninfo, redact_secrets
from detector.errors import PlanshiftError
from detector.model.identity import text_query_key

CAPTURE_TIMEOUT = "30s"
APPLICATION_NAME = "planshift capture"
WRITES = (ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt, ast.MergeStmt)
HIDDEN = "<insufficient privilege>"
SQUASHED = "/*, ... */"  # `IN ($1 /*, ... */)`: pg_stat_statements 18 squashes lists
# not ranked: no query of the application (BEGIN, SET, DDL; catalog queries of tools and
# drivers; monitoring; planshift's own statements; what --exclude names)
IGNORED = ("utility", "catalog", "monitoring", "planshift", "excluded")
SESSION_SQL = (
    "SELECT set_config('default_transaction_read_only', 'on', false), "
    "set_config('statement_timeout', %s, false), set_config('lock_timeout', %s, false)"
)
ROLES_SQL = "SELECT oid::bigint, rolname FROM pg_roles WHERE oid::bigint = ANY(%s::bigint[])"
SOURCE_SQL = (
    "SELECT current_database(), oid, pg_database_size(oid), "
    "current_setting('server_version_num')::int, "
    "current_setting('transaction_read_only') FROM pg_database "
    "WHERE datname = current_database()"
)


@dataclass(frozen=True)
class Statement:
    """One pg_stat_statements entry of the captured database (summed over users)."""

    queryid: int
    sql: str  # as pg_stat_statements shows it: constants and bound parameters as $n
    calls: int
    total_ms: float
    key: str  # THE query key of a text (detector.model.identity), shared with log entries
    parameters: int  # the highest $n
    # query | write | utility | catalog | monitoring | planshift | excluded | hidden |
    # unparsable | missing | squashed (and unplannable, once planned on the source)
    kind: str
    reason: str = ""  # why it is not replayed ("" for a query)
    queryids: tuple[int, ...] = ()  # other entries of the same text (another protocol, user)

    @property
    def mean_ms(self) -> float:
        return self.total_ms / self.calls if self.calls else 0.0


@dataclass(frozen=True)
class SourceRead:
    server_version_num: int
    database: str
    database_bytes: int
    redacted_dsn: str
    statements: tuple[Statement, ...]  # every statement of the database, by total time
    database_oid: int = 0
    roles: tuple[str, ...] = ()  # that ran the application's statements, most time first


def open_source(
    dsn: str, timeout: str = CAPTURE_TIMEOUT, search_path: str | None = None
) -> psycopg.Connection[Any]:
    """A session on the source in which every transaction is read-only and time-limited;
    `search_path`: the application's, when its tables are not on the capture role's."""
    check_conninfo(dsn, "--target")
    try:
        conn = psycopg.connect(
            dsn, autocommit=True, connect_timeout=10, application_name=APPLICATION_NAME
        )
    except psycopg.Error as exc:
        raise PlanshiftError(
            f"cannot connect to {redact_conninfo(dsn)}: {redact_secrets(str(exc).strip(), dsn)}",
            "check the DSN (a password belongs in PGPASSWORD or ~/.pgpass)",
        ) from None
    try:
        conn.execute(SESSION_SQL, [timeout, timeout])
        if search_path is not None:
            conn.execute("SELECT set_config('search_path', %s, false)", [search_path])
    except psycopg.Error as exc:
        conn.close()
        raise PlanshiftError(
            f"cannot set up the capture session (read-only, timeouts): {str(exc).strip()}",
            "--statement-timeout takes a PostgreSQL duration (30s, 2min); --search-path a "
            "list of schemas (app, public)",
        ) from None
    return conn


def read_source(
    conn: psycopg.Connection[Any], exclude: Sequence[re.Pattern[str]] = ()
) -> SourceRead:
    """The database's statements from pg_stat_statements, classified, by total time;
    `exclude`: patterns searched in their text (--exclude)."""
    row = conn.execute(SOURCE_SQL).fetchone()
    assert row is not None
    database, dbid, size, version, read_only = row
    if read_only != "on":  # never reached: open_source made it so; checked all the same
        raise PlanshiftError("the capture session is not read-only; nothing was read")
    summed: dict[int, tuple[str, int, float]] = {}
    by_user: dict[int, dict[int, float]] = {}  # queryid -> userid -> ms
    read = read_pgss(conn)
    own = own_statement_keys(read.sql)
    for entry in read.entries:
        if entry.dbid not in (None, dbid) or entry.toplevel is False:
            continue
        text, calls, total = summed.get(entry.queryid, (entry.query or "", 0, 0.0))
        summed[entry.queryid] = (text, calls + entry.calls, total + entry.total_exec_time)
        users = by_user.setdefault(entry.queryid, {})
        if entry.userid is not None:
            users[entry.userid] = users.get(entry.userid, 0.0) + entry.total_exec_time
    ordered = sorted(summed.items(), key=lambda item: (-item[1][2], item[0]))
    statements = [
        classify(queryid, *values, own=own, exclude=exclude) for queryid, values in ordered
    ]
    statements = merged(check_relations(conn, statements))
    return SourceRead(
        version,
        str(database),
        int(size),
        redact_conninfo(conn.info.dsn),
        tuple(statements),
        int(dbid),
        _roles(conn, statements, by_user),
    )


def _roles(
    conn: psycopg.Connection[Any],
    statements: Sequence[Statement],
    by_user: Mapping[int, Mapping[int, float]],
) -> tuple[str, ...]:
    """The roles that ran the application's statements, most production time first."""
    time: dict[int, float] = {}
    for statement in statements:
        if statement.kind in IGNORED:
            continue
        for queryid in (statement.queryid, *statement.queryids):
            for user, ms in by_user.get(queryid, {}).items():
                time[user] = time.get(user, 0.0) + ms
    if not time:
        return ()
    names = dict(conn.execute(ROLES_SQL, [list(time)]).fetchall())
    ranked = sorted(time, key=lambda user: (-time[user], user))
    return tuple(str(names[user]) for user in ranked if user in names)


def own_statement_keys(pgss_sql: str) -> frozenset[str]:
    """Query keys of what planshift sends to a source: its pg_stat_statements read (as this
    capture sent it, the view named with or without its schema, as a snapshot from another
    session may have), its reads of the database and of the relations queries name."""
    sent = (
        SESSION_SQL,
        ROLES_SQL,
        SOURCE_SQL,
        RELATIONS_SQL,
        VIEW_SQL,
        COLUMNS_SQL,
        *SETTINGS_SQLS,
    )
    texts = [_numbered(text) for text in sent]
    if pgss_sql:
        relation = pgss_sql.split(" FROM ", 1)[1].split()[0]
        schema, _, bare = relation.rpartition(".")
        texts += [pgss_sql.replace(f" FROM {relation} ", f" FROM {name} ") for name in
                  {relation, bare, f"public.{bare}"}]  # fmt: skip
        texts += [INFO_SQL.format(schema=name) for name in {schema or "public", "public"}]
    return frozenset(text_query_key(text) for text in texts)


# what planshift wraps around a workload query it plans or measures on a server (a capture's
# plan check, a run on a --dsn server, an attribution trial), as pg_stat_statements keeps it
OWN_PREFIXES = (
    PLAN_ONLY,
    MEASURED,
    GENERIC_EXPLAIN,
    *MEASURED_BY_RUNS.values(),
    f"PREPARE {PREPARED_NAME} ",
    f"EXPLAIN (SETTINGS, FORMAT JSON) EXECUTE {PREPARED_NAME}",
    f"DEALLOCATE {PREPARED_NAME}",
)


def _numbered(sql: str) -> str:
    """psycopg's %s placeholders as the server saw them: $1, $2 ..."""
    pieces = sql.split("%s")
    return "".join(f"{p}${i}" if i < len(pieces) else p for i, p in enumerate(pieces, 1))


def classify(
    queryid: int,
    sql: str,
    calls: int,
    total_ms: float,
    *,
    own: Collection[str] = (),
    exclude: Sequence[re.Pattern[str]] = (),
) -> Statement:
    parameters = max((int(sql[t.start + 1 : t.end + 1]) for t in _params(sql)), default=0)
    key = text_query_key(sql)
    made = Statement(queryid, sql, calls, total_ms, key, parameters, "query")
    if not sql or sql == HIDDEN:
        return _as(made, "hidden", "text hidden: the capture role needs pg_read_all_stats")
    if key in own or sql.startswith(OWN_PREFIXES):
        return _as(made, "planshift", "planshift's own statement (capture, snapshot, run)")
    matched = next((p.pattern for p in exclude if p.search(sql)), None)
    if matched is not None:
        return _as(made, "excluded", f"--exclude {matched!r}")
    try:
        parsed = parse_sql(sql)
    except pg_parser.ParseError as exc:
        return _as(made, "unparsable", f"PostgreSQL's parser rejects the text: {exc}")
    if len(parsed) != 1:
        return _as(made, "utility", "several statements in one entry")
    node = parsed[0].stmt
    if node is None:
        return _as(made, "utility", "an empty statement")
    if isinstance(node, WRITES) or _writes(node):
        return _as(made, "write", "writes (INSERT, UPDATE, DELETE, MERGE or SELECT INTO)")
    if not isinstance(node, ast.SelectStmt):
        return _as(made, "utility", f"utility statement ({type(node).__name__})")
    if SQUASHED in sql:
        reason = (
            "pg_stat_statements (18+) shows a list of values as one $n: its length, and "
            "so the plan, cannot be replayed"
        )
        return _as(made, "squashed", reason)
    return made


def _as(statement: Statement, kind: str, reason: str) -> Statement:
    return replace(statement, kind=kind, reason=reason)


def merged(statements: Sequence[Statement]) -> list[Statement]:
    """One statement per query key, by total time: pg_stat_statements keeps a constant (simple
    protocol) and a bound parameter (extended protocol) of the same text apart."""
    by_key: dict[str, Statement] = {}
    for s in statements:
        first = by_key.get(s.key)
        by_key[s.key] = (
            s
            if first is None
            else replace(
                first,
                calls=first.calls + s.calls,
                total_ms=first.total_ms + s.total_ms,
                queryids=(*first.queryids, s.queryid),
            )
        )
    return sorted(by_key.values(), key=lambda s: (-s.total_ms, s.queryid))


def _params(sql: str) -> list[Any]:
    try:
        return [t for t in pg_parser.scan(sql) if t.name == "PARAM"]
    except pg_parser.ParseError:
        return []


def _writes(node: ast.Node) -> bool:
    """A data-modifying CTE or a SELECT INTO anywhere in the statement."""
    if isinstance(node, ast.SelectStmt) and node.intoClause is not None:
        return True
    return any(isinstance(found, (*WRITES, ast.IntoClause)) for found in walk(node))


def plan_errors(
    conn: psycopg.Connection[Any],
    checks: Sequence[tuple[str, Mapping[str, Any] | None, bool]],
    version: int,
    timeout: str = CAPTURE_TIMEOUT,
) -> list[str | None]:
    """Per (sql, parameters, generic) query as the workload file will send it: None when the
    source plans it, else PostgreSQL's error. Plain EXPLAIN, nothing executed (the generic
    plan of SQL with $n: EXPLAIN (GENERIC_PLAN) on 16+, PREPARE and DEALLOCATE before), in the
    session's read-only transactions; parameters are merged client-side, as the runner does."""
    cursor = psycopg.ClientCursor(conn)
    errors: list[str | None] = []
    for sql, params, generic in checks:
        try:
            if generic:
                generic_plan(conn, sql, {"statement_timeout": timeout}, version)
            else:
                cursor.execute(PLAN_ONLY + sql, params)
                cursor.fetchall()
            errors.append(None)
        except (psycopg.Error, PlanshiftError) as exc:
            errors.append(str(exc).strip().splitlines()[0])
    return errors
