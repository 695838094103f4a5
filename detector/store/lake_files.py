"""Which files of a lake are read: those shaped like what the lake's writers write, nothing else.

A lake is a shared directory: a file in it may be a symlink to /etc/passwd, a Parquet file whose
columns have other types, or no Parquet at all. Each such file is skipped and named to `notes`
with the reason, never read and never a traceback; the others are read as usual. The check
costs one `parquet_schema` over a table's files (their footers, ~16 ms for 226 files) against
the schema planshift writes for that table; only a file that differs is looked at alone
(`DESCRIBE`, ~1 ms), so that a file written by an older planshift, with fewer columns of the
same types, is still read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import duckdb

from detector.store.migrate import load_migrations
from detector.store.schema import reference_columns

Notes = Callable[[str], None]
_SCHEMA = (
    "SELECT file_name, name, type, logical_type, repetition_type, num_children "
    "FROM parquet_schema(?) ORDER BY file_name"
)


def vetted(con: Any, lake: Path, table: str, files: Sequence[Path], notes: Notes) -> list[str]:
    """The files of `table` that may be read, as strings for read_parquet; the others noted."""
    root = lake.resolve()
    named: dict[str, Path] = {}  # what read_parquet reads -> the path as found
    for path in files:
        reason = _not_a_lake_file(path, root)
        if reason is None:
            named[str(path.resolve())] = path
        else:
            notes(f"lake: skipped {path}: {reason}")
    if not named:
        return []
    expected = _expected(con, table)
    schemas = _schemas(con, list(named))
    good = []
    for name, path in named.items():
        found = schemas.get(name)
        reason = (
            "not a Parquet file" if found is None
            else None if found == expected
            else _type_problem(con, table, name)
        )  # fmt: skip
        if reason is None:
            good.append(name)
        else:
            notes(f"lake: skipped {path}: {reason}")
    return good


def _not_a_lake_file(path: Path, root: Path) -> str | None:
    if path.is_symlink():
        return f"a symbolic link (to {os.readlink(path)}), not a file the lake's writers write"
    if not path.is_file():
        return "not a regular file"
    if not path.resolve().is_relative_to(root):
        return f"it lies outside the lake ({path.resolve()})"
    return None


Schema = tuple[tuple[Any, ...], ...]


def _schemas(con: Any, files: list[str]) -> dict[str, Schema]:
    """Each readable file's Parquet schema (its root row left out); unreadable files absent."""
    try:
        rows = con.execute(_SCHEMA, [files]).fetchall()
    except duckdb.Error:  # one file is not Parquet: read them one by one to find which
        rows = []
        for name in files:
            try:
                rows.extend(con.execute(_SCHEMA, [[name]]).fetchall())
            except duckdb.Error:
                continue
    found: dict[str, list[tuple[Any, ...]]] = {}
    for file_name, *row in rows:
        found.setdefault(file_name, []).append(tuple(row))
    return {name: tuple(schema[1:]) for name, schema in found.items()}


def _expected(con: Any, table: str) -> Schema:
    """The Parquet schema planshift writes for `table`: an empty file of its columns."""
    scratch = Path(con.execute("SELECT current_setting('temp_directory')").fetchone()[0])
    sample = scratch / f"expected_{table}.parquet"
    if not sample.exists():
        columns = ", ".join(f'NULL::{kind} AS "{name}"' for name, kind in _columns(table))
        con.execute(f"COPY (SELECT {columns} LIMIT 0) TO '{_quoted(sample)}' (FORMAT parquet)")
    return _schemas(con, [str(sample)])[str(sample)]


def _type_problem(con: Any, table: str, name: str) -> str | None:
    """Why a file whose schema differs cannot be read as `table` (None: it can, e.g. an older
    planshift's file with fewer columns)."""
    try:
        rows = con.execute(
            "DESCRIBE SELECT * FROM read_parquet(?, hive_partitioning = false)", [name]
        ).fetchall()
    except duckdb.Error as exc:
        return f"unreadable: {str(exc).splitlines()[0]}"
    expected = dict(_columns(table))
    found = {row[0]: row[1] for row in rows}
    wrong = [
        f"{column} is {kind}, expected {expected[column]}"
        for column, kind in found.items()
        if column in expected and kind != expected[column]
    ]
    if wrong:
        return "column types differ from planshift's: " + "; ".join(wrong)
    if not set(found) & set(expected):
        return f"none of the columns of {table}"
    return None


@lru_cache(maxsize=64)
def _columns(table: str) -> tuple[tuple[str, str], ...]:
    return reference_columns(tuple(load_migrations())).get(table, ())


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
