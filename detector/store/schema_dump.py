"""The current schema of a store as one SQL file, and the README's table of tables, both
written from what the migrations create (`scripts/store_schema.py`; tests/test_docs.py checks
that both are current). The migrations stay the history; `schema.sql` is what to read."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import duckdb

from detector.store.connection import SAFE_CONFIG
from detector.store.migrate import SCHEMA_VERSION_DDL, load_migrations

HEADER = """\
-- The schema of a planshift store at version {version}, generated from
-- detector/store/migrations/ by scripts/store_schema.py: do not edit (tests/test_docs.py
-- checks it is current). Every table and column has a comment; read it in a store with
-- SELECT table_name, column_name, comment FROM duckdb_columns() WHERE NOT internal;
"""


def current_schema() -> tuple[int, Any]:
    """An in-memory database with every migration applied, and its version."""
    con = duckdb.connect(":memory:", config=SAFE_CONFIG)
    con.execute(SCHEMA_VERSION_DDL)
    migrations = load_migrations()
    for migration in migrations:
        con.execute(migration.sql)
    return len(migrations), con


def schema_sql() -> str:
    version, con = current_schema()
    with con:
        parts = [HEADER.format(version=version)]
        parts += [f"{sql}\n" for (sql,) in con.execute(
            "SELECT sql FROM duckdb_sequences() WHERE NOT temporary ORDER BY sequence_name"
        ).fetchall()]  # fmt: skip
        tables = con.execute(
            "SELECT table_name, sql, comment FROM duckdb_tables() WHERE NOT internal "
            "ORDER BY table_name"
        ).fetchall()
        for table, sql, comment in tables:
            parts.append("\n" + _one_column_per_line(sql) + "\n")
            parts.append(f"COMMENT ON TABLE {table} IS {_literal(comment)};\n")
            for column, note in con.execute(
                "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = ? "
                "AND NOT internal ORDER BY column_index",
                [table],
            ).fetchall():
                if note:
                    parts.append(f"COMMENT ON COLUMN {table}.{column} IS {_literal(note)};\n")
    return "".join(parts)


def readme_tables() -> str:
    """The README's table of the store's tables, each with its comment."""
    _, con = current_schema()
    with con:
        rows = con.execute(
            "SELECT table_name, comment FROM duckdb_tables() WHERE NOT internal ORDER BY table_name"
        ).fetchall()
    lines = ["| table | what it holds |", "|---|---|"]
    lines += [f"| `{table}` | {(comment or '').replace('|', '/')} |" for table, comment in rows]
    return "\n".join(lines) + "\n"


def _one_column_per_line(sql: str) -> str:
    head, _, body = sql.partition("(")
    body = body.rstrip().removesuffix(";").removesuffix(")")
    items = [item.strip() for item in _top_level_split(body)]
    return head + "(\n    " + ",\n    ".join(items) + "\n);"


def _top_level_split(text: str) -> Iterator[str]:
    depth, start, quoted = 0, 0, False
    for index, char in enumerate(text):
        if char == "'":
            quoted = not quoted
        elif quoted:
            continue
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            yield text[start:index]
            start = index + 1
    yield text[start:]


def _literal(text: str | None) -> str:
    return "NULL" if text is None else "'" + re.sub("'", "''", text) + "'"
