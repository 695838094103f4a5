"""SQL statements as PostgreSQL's own parser (pglast) sees them: no I/O, no server."""

from __future__ import annotations

from collections.abc import Sequence


def statement_count(sql: str) -> int:
    """How many statements PostgreSQL's own parser finds in SQL; 1 when it cannot parse it
    (the server then reports the syntax error, with its position)."""
    from pglast import split
    from pglast.parser import ParseError

    try:
        return len(split(sql, with_parser=True))
    except ParseError:
        return 1


def setup_relations(statements: Sequence[str]) -> list[str]:
    """Tables, views and indexes the setup statements create, schema-qualified when written so."""
    from pglast import ast, parse_sql
    from pglast.parser import ParseError

    names: list[str] = []
    for statement in statements:
        try:
            parsed = parse_sql(statement)
        except ParseError:
            continue
        for raw in parsed:
            node = raw.stmt
            relation = None
            if isinstance(node, ast.CreateStmt | ast.ViewStmt):
                relation = node.relation if isinstance(node, ast.CreateStmt) else node.view
            elif isinstance(node, ast.CreateTableAsStmt) and node.into is not None:
                relation = node.into.rel
            elif isinstance(node, ast.IndexStmt) and node.idxname:
                index = str(node.idxname)
                schema = node.relation.schemaname if node.relation is not None else None
                names.append(f"{schema}.{index}" if schema else index)
            if relation is not None and relation.relpersistence != "t":
                table, schema = str(relation.relname), relation.schemaname
                names.append(f"{schema}.{table}" if schema else table)
    return list(dict.fromkeys(names))
