"""What every part of the store shares: the one connection, transactions, batched inserts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class StoreBase:
    """The connection the topic mixins of `Store` (reads, runs, ingest, results, ...) share."""

    _con: Any
    path: Path
    _depth: int
    _column_types: dict[str, dict[str, str]]

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside commit together or not at all; nested calls join the outer one."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._con.begin()
        self._depth = 1
        try:
            yield
        except BaseException:
            self._con.rollback()
            raise
        else:
            self._con.commit()
        finally:
            self._depth = 0

    def _insert_rows(self, table: str, names: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """INSERT a batch with one statement: one list parameter per column, unnested together.

        Some 70 times faster than executemany (10,000 rows: 0.07 s against 5 s).
        """
        if not rows:
            return
        columns = [list(column) for column in zip(*rows, strict=True)]
        if len(columns) != len(names):
            raise ValueError(f"{table}: {len(names)} columns named, rows have {len(columns)}")
        types = self._types_of(table)
        selects = ", ".join(f"unnest(${i}::{types[name]}[])" for i, name in enumerate(names, 1))
        self._con.execute(f"INSERT INTO {table} ({', '.join(names)}) SELECT {selects}", columns)

    def _types_of(self, table: str) -> dict[str, str]:
        if table not in self._column_types:
            rows = self._con.execute(
                "SELECT column_name, data_type FROM duckdb_columns() "
                "WHERE NOT internal AND table_name = ?",
                [table],
            ).fetchall()
            self._column_types[table] = {name: data_type for name, data_type in rows}
        return self._column_types[table]
