"""Is this file a planshift store? Its objects compared with what the migrations create.

planshift's tables must be tables (not views), with the columns and types its migrations give
them, and the file must hold no macros (they shadow built-in functions) and no generated
columns: code that would run when planshift reads. A DBA's own extra tables and views (under
other names) are left alone: planshift never reads them. The reference schema of each version
is built once per process in an in-memory database from the same migration files; that of the
packaged migrations is read from `reference_columns.json` beside them when its key (a hash of
the migrations' text) and DuckDB's version match, else built the same way (~0.1 s of CPU per
command; `make readme` refreshes the file, tests/test_store.py checks it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

from detector.errors import PlanshiftError
from detector.store.connection import SAFE_CONFIG
from detector.store.migrate import MIGRATIONS_PACKAGE, SCHEMA_VERSION_DDL, Migration

Columns = Mapping[str, tuple[tuple[str, str], ...]]

_NOT_OURS_HINT = (
    "pass another --store path; planshift does not read or write into foreign databases"
)
_CODE_OBJECTS = (
    (
        "macro",
        "SELECT DISTINCT schema_name || '.' || function_name FROM duckdb_functions() "
        "WHERE NOT internal AND function_type IN ('macro', 'table_macro')",
    ),
    (
        "generated column",
        "SELECT table_name || '.' || column_name FROM duckdb_columns() "
        "WHERE NOT internal AND is_generated",
    ),
)
# DuckDB 1.5 has no duckdb_columns().is_generated: the table's DDL names its generated columns
_GENERATED_BEFORE_2 = (
    "generated column",
    "SELECT table_name || ' (a generated column)' FROM duckdb_tables() "
    "WHERE NOT internal AND contains(sql, ' GENERATED ALWAYS AS')",
)


def user_tables(con: Any) -> set[str]:
    rows = con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE NOT internal"
    ).fetchall()
    return {name if schema == "main" else f"{schema}.{name}" for schema, name in rows}


def refuse_code(con: Any, path: Path, migrations: Sequence[Migration]) -> None:
    """Macros, generated columns and views named like planshift's tables run when read."""
    rows = con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'"
    ).fetchall()
    views: list[str] = []
    if rows:  # the reference schema (~0.1 s of CPU) only when there are views to judge
        ours = set(reference_columns(tuple(migrations)))
        views = [name for (name,) in rows if name in ours]
    found = [("view", views)] + [
        (kind, [row[0] for row in con.execute(sql).fetchall()]) for kind, sql in _code_objects()
    ]
    for kind, names in found:
        if names:
            raise PlanshiftError(
                f"{path} is not a planshift store as planshift wrote it: it has the {kind} "
                f"{', '.join(sorted(names))} (code that runs when the store is read; "
                "planshift creates none)",
                _NOT_OURS_HINT,
            )


@lru_cache(maxsize=1)
def _code_objects() -> tuple[tuple[str, str], ...]:
    with duckdb.connect(":memory:", config=SAFE_CONFIG) as con:
        described = con.execute("DESCRIBE SELECT * FROM duckdb_columns()").fetchall()
    if any(row[0] == "is_generated" for row in described):
        return _CODE_OBJECTS
    return (_CODE_OBJECTS[0], _GENERATED_BEFORE_2)


def columns_of(con: Any) -> dict[str, tuple[tuple[str, str], ...]]:
    rows = con.execute(
        "SELECT schema_name, table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE NOT internal ORDER BY schema_name, table_name, column_index"
    ).fetchall()
    found: dict[str, list[tuple[str, str]]] = {}
    for schema, table, column, data_type in rows:
        found.setdefault(table if schema == "main" else f"{schema}.{table}", []).append(
            (column, data_type)
        )
    return {table: tuple(columns) for table, columns in found.items()}


def check_schema_version_table(con: Any, path: Path) -> None:
    _compare(path, {"schema_version": columns_of(con).get("schema_version", ())}, _bootstrap())


def check_schema(con: Any, path: Path, migrations: Sequence[Migration], version: int) -> None:
    """The tables and columns of version `version` exactly; refuse anything else."""
    _compare(path, columns_of(con), reference_columns(tuple(migrations[:version])))


def _compare(path: Path, actual: Columns, expected: Columns) -> None:
    missing = sorted(set(expected) - set(actual))
    changed = sorted(t for t in set(actual) & set(expected) if actual[t] != expected[t])
    problems = [
        f"{label} {', '.join(names)}"
        for label, names in (
            ("missing tables", missing),
            ("tables with other columns", changed),
        )
        if names
    ]
    if problems:
        raise PlanshiftError(
            f"{path} is not a planshift store as planshift wrote it: {'; '.join(problems)}",
            _NOT_OURS_HINT,
        )


REFERENCE_FILE = "reference_columns.json"


@lru_cache(maxsize=1)
def _bootstrap() -> Columns:
    return reference_columns(())


@lru_cache(maxsize=16)
def reference_columns(migrations: tuple[Migration, ...]) -> Columns:
    packaged = _packaged().get(reference_key(migrations))
    if isinstance(packaged, dict) and packaged.get("duckdb") == duckdb.__version__:
        columns = packaged["columns"]
        return {table: tuple((c, t) for c, t in found) for table, found in columns.items()}
    return built_reference(migrations)


def built_reference(migrations: tuple[Migration, ...]) -> Columns:
    with duckdb.connect(":memory:", config=SAFE_CONFIG) as con:
        con.execute(SCHEMA_VERSION_DDL)
        for migration in migrations:
            con.execute(migration.sql)
        return columns_of(con)


def reference_key(migrations: Sequence[Migration]) -> str:
    """A hash of the DDL the reference schema is built from."""
    digest = hashlib.sha256(SCHEMA_VERSION_DDL.encode())
    for migration in migrations:
        digest.update(f"\n-- {migration.file_name}\n{migration.sql}".encode())
    return digest.hexdigest()


@lru_cache(maxsize=1)
def _packaged() -> dict[str, Any]:
    try:
        text = resources.files(MIGRATIONS_PACKAGE).joinpath(REFERENCE_FILE).read_text("utf-8")
        found = json.loads(text)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def reference_json(migrations: tuple[Migration, ...]) -> str:
    """The reference schemas of no migration and of all of them, under this DuckDB: the text
    of `reference_columns.json` (scripts/store_schema.py writes it beside the migrations)."""
    found = {
        reference_key(m): {"duckdb": duckdb.__version__, "columns": built_reference(m)}
        for m in ((), migrations)
    }
    return json.dumps(found, indent=1, sort_keys=True) + "\n"
