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

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from pglast import ast, parse_sql
from pglast import parser as pg_parser
from pglast.visitors import Visitor

from collectors.attribution import PLAN_ONLY
from collectors.generic_plans import generic_plan
from collectors.pgss import read_pgss
from collectors.servers.targets import check_conninfo, redact_conninfo, redact_secrets
from detector.errors import PlanshiftError
from detector.model.identity import text_query_key

CAPTURE_TIMEOUT = "30s"
APPLICATION_NAME = "planshift capture"
WRITES = (ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt, ast.MergeStmt)
HIDDEN = "<insufficient privilege>"
SQUASHED = "/*, ... */"  # `IN ($1 /*, ... */)`: pg_stat_statements 18 squashes lists
SYSTEM_SCHEMAS = ("pg_catalog", "information_schema")
# not ranked: no query of the application (BEGIN, SET, DDL; catalog queries of tools and drivers)
IGNORED = ("utility", "catalog")


@dataclass(frozen=True)
class Statement:
    """One pg_stat_statements entry of the captured database (summed over users)."""

    queryid: int
    sql: str  # as pg_stat_statements shows it: constants and bound parameters as $n
    calls: int
    total_ms: float
    key: str  # THE query key of a text (detector.model.identity), shared with log entries
    parameters: int  # the highest $n
    kind: str  # query | write | utility | catalog | hidden | unparsable | missing | squashed
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
        conn.execute(
            "SELECT set_config('default_transaction_read_only', 'on', false), "
            "set_config('statement_timeout', %s, false), set_config('lock_timeout', %s, false)",
            [timeout, timeout],
        )
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


def read_source(conn: psycopg.Connection[Any]) -> SourceRead:
    """The database's statements from pg_stat_statements, classified, by total time."""
    row = conn.execute(
        "SELECT current_database(), oid, pg_database_size(oid), "
        "current_setting('server_version_num')::int, "
        "current_setting('transaction_read_only') FROM pg_database "
        "WHERE datname = current_database()"
    ).fetchone()
    assert row is not None
    database, dbid, size, version, read_only = row
    if read_only != "on":  # never reached: open_source made it so; checked all the same
        raise PlanshiftError("the capture session is not read-only; nothing was read")
    summed: dict[int, tuple[str, int, float]] = {}
    for entry in read_pgss(conn).entries:
        if entry.dbid not in (None, dbid) or entry.toplevel is False:
            continue
        text, calls, total = summed.get(entry.queryid, (entry.query or "", 0, 0.0))
        summed[entry.queryid] = (text, calls + entry.calls, total + entry.total_exec_time)
    ordered = sorted(summed.items(), key=lambda item: (-item[1][2], item[0]))
    statements = [classify(queryid, *values) for queryid, values in ordered]
    statements = merged(check_relations(conn, statements))
    return SourceRead(
        version, str(database), int(size), redact_conninfo(conn.info.dsn), tuple(statements)
    )


def classify(queryid: int, sql: str, calls: int, total_ms: float) -> Statement:
    parameters = max((int(sql[t.start + 1 : t.end + 1]) for t in _params(sql)), default=0)
    key = text_query_key(sql)
    made = Statement(queryid, sql, calls, total_ms, key, parameters, "query")
    if not sql or sql == HIDDEN:
        return _as(made, "hidden", "text hidden: the capture role needs pg_read_all_stats")
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
    return any(isinstance(found, (*WRITES, ast.IntoClause)) for found in _walk(node))


def _walk(node: ast.Node) -> Iterator[ast.Node]:
    found: list[ast.Node] = []

    class Collect(Visitor):
        def visit(self, ancestors: Any, node: ast.Node) -> None:
            found.append(node)

    Collect()(node)
    return iter(found)


def relations_of(sql: str) -> list[tuple[str, bool]]:
    """(name as written, temporary) of the relations a query reads, CTE names excluded."""
    try:
        node = parse_sql(sql)[0].stmt
    except (pg_parser.ParseError, IndexError):
        return []
    if node is None:
        return []
    ctes = {str(c.ctename) for c in _walk(node) if isinstance(c, ast.CommonTableExpr)}
    names: dict[str, bool] = {}
    for found in _walk(node):
        if isinstance(found, ast.RangeVar) and found.relname:
            name = f"{found.schemaname}.{found.relname}" if found.schemaname else found.relname
            if found.schemaname is None and found.relname in ctes:
                continue
            names[str(name)] = names.get(str(name), False) or found.relpersistence == "t"
    return list(names.items())


def check_relations(
    conn: psycopg.Connection[Any], statements: Sequence[Statement]
) -> list[Statement]:
    """Queries on a temporary table, or on a relation the capture session does not find."""
    names = sorted(
        {name for s in statements if s.kind == "query" for name, _ in relations_of(s.sql)}
    )
    rows = conn.execute(
        "SELECT name, c.relpersistence, c.relnamespace::regnamespace::text "
        "FROM unnest(%s::text[]) AS name LEFT JOIN pg_class c ON c.oid = to_regclass(name)",
        [names],
    ).fetchall()
    persistence = {str(name): p for name, p, _ in rows}
    system = {str(name) for name, _, schema in rows if schema in SYSTEM_SCHEMAS}
    checked = []
    for statement in statements:
        read = (
            [name for name, _ in relations_of(statement.sql)] if statement.kind == "query" else []
        )
        missing = [name for name in read if persistence.get(name) in (None, "t")]
        if statement.kind == "query" and all(name in system for name in read):
            reason = "reads no table of the application (system catalogs, or none)"
            statement = _as(statement, "catalog", reason)
        elif missing:
            reason = (
                f"reads {', '.join(missing)}, which the capture session cannot see "
                "(a temporary table, dropped since, or in a schema not on the capture's "
                "search_path: --search-path)"
            )
            statement = _as(statement, "missing", reason)
        checked.append(statement)
    return checked


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
