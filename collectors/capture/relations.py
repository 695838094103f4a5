"""What a captured query reads, as the source resolves it: the application's tables, the
catalogs, statistics views (monitoring), or a relation the capture session cannot see.

A query that reads only catalogs (an ORM's introspection, a driver's type lookup) or
statistics views (`pg_stat_*` of pg_catalog, and the `pg_*` views and functions of extensions
such as pg_stat_statements and pg_buffercache: a DBA's monitoring, planshift's own snapshot) is
not the application's workload: it is left out of the capture and counted in its coverage. A
monitoring query in a replayed workload is worse than useless: `blk_read_time` of
pg_stat_statements was renamed in 17, so it fails on the newer version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import psycopg
from pglast import ast, parse_sql
from pglast import parser as pg_parser
from pglast.visitors import Visitor

SYSTEM_SCHEMAS = ("pg_catalog", "information_schema")
STATISTICS_PREFIX = "pg_stat"  # pg_stat_*, pg_statio_*, pg_stats, pg_statistic_ext ...
SYSTEM_MONITORING = ("pg_locks", "pg_prepared_xacts", "pg_replication_slots")
RELATIONS_SQL = (
    "SELECT name, c.relpersistence, n.nspname, c.relname, EXISTS (SELECT 1 FROM pg_depend d "
    "WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e') "
    "FROM unnest(%s::text[]) AS name LEFT JOIN pg_class c ON c.oid = to_regclass(name) "
    "LEFT JOIN pg_namespace n ON n.oid = c.relnamespace"
)


def walk(node: ast.Node) -> list[ast.Node]:
    found: list[ast.Node] = []

    class Collect(Visitor):
        def visit(self, ancestors: Any, node: ast.Node) -> None:
            found.append(node)

    Collect()(node)
    return found


def _statement(sql: str) -> ast.Node | None:
    try:
        node = parse_sql(sql)[0].stmt
    except (pg_parser.ParseError, IndexError):
        return None
    return node if isinstance(node, ast.Node) else None


def relations_of(sql: str) -> list[tuple[str, bool]]:
    """(name as written, temporary) of the relations a query reads, CTE names excluded."""
    node = _statement(sql)
    if node is None:
        return []
    nodes = walk(node)
    ctes = {str(c.ctename) for c in nodes if isinstance(c, ast.CommonTableExpr)}
    names: dict[str, bool] = {}
    for found in nodes:
        if isinstance(found, ast.RangeVar) and found.relname:
            name = f"{found.schemaname}.{found.relname}" if found.schemaname else found.relname
            if found.schemaname is None and found.relname in ctes:
                continue
            names[str(name)] = names.get(str(name), False) or found.relpersistence == "t"
    return list(names.items())


def functions_read(sql: str) -> list[str]:
    """Names of the functions a query reads rows from (`FROM pg_stat_statements(true)`)."""
    node = _statement(sql)
    if node is None:
        return []
    names = []
    for found in walk(node):
        if isinstance(found, ast.RangeFunction):
            for item in found.functions or ():
                call = item[0] if isinstance(item, tuple) and item else None
                if isinstance(call, ast.FuncCall) and call.funcname:
                    names.append(str(getattr(call.funcname[-1], "sval", "")))
    return names


def check_relations(conn: psycopg.Connection[Any], statements: Sequence[Any]) -> list[Any]:
    """Each query classified by what it reads: `monitoring`, `catalog`, `missing` (a temporary
    table, or one the capture session does not find), or left a `query`."""
    names = sorted(
        {name for s in statements if s.kind == "query" for name, _ in relations_of(s.sql)}
    )
    rows = conn.execute(RELATIONS_SQL, [names]).fetchall()
    persistence = {str(name): p for name, p, _, _, _ in rows}
    system = {str(name) for name, _, schema, _, _ in rows if schema in SYSTEM_SCHEMAS}
    monitoring = {
        str(name)
        for name, _, schema, relation, extension in rows
        if relation is not None
        and (
            (schema in SYSTEM_SCHEMAS and _statistics(str(relation)))
            or (extension and str(relation).startswith("pg_"))
        )
    }
    checked = []
    for statement in statements:
        if statement.kind != "query":
            checked.append(statement)
            continue
        read = [name for name, _ in relations_of(statement.sql)]
        missing = [name for name in read if persistence.get(name) in (None, "t")]
        watched = [name for name in read if name in monitoring]
        watched += [f"{f}()" for f in functions_read(statement.sql) if f.startswith("pg_")]
        if watched and all(name in system or name in monitoring for name in read):
            reason = f"monitoring: reads statistics views ({', '.join(dict.fromkeys(watched))})"
            statement = replace(statement, kind="monitoring", reason=reason)
        elif all(name in system for name in read):
            reason = "reads no table of the application (system catalogs, or none)"
            statement = replace(statement, kind="catalog", reason=reason)
        elif missing:
            reason = (
                f"reads {', '.join(missing)}, which the capture session cannot see "
                "(a temporary table, dropped since, or in a schema not on the capture's "
                "search_path: --search-path)"
            )
            statement = replace(statement, kind="missing", reason=reason)
        checked.append(statement)
    return checked


def _statistics(relation: str) -> bool:
    return relation.startswith(STATISTICS_PREFIX) or relation in SYSTEM_MONITORING
