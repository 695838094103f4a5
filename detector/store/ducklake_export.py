"""Writing a host's store into a DuckLake lake: one catalog transaction per host, retried.

The lake's tables are the store's with `lake_host` in front, and `lake_day` for the tables with
a time and for `log_entries` (the day of its execution, with its query key beside it as
`lake_query_key`), partitioned by host and day; each day's executions are inserted sorted by
query key. An export replaces the host's (table, day) parts whose signature changed
(`planshift_exports`), after checking that the host name is this store's (`planshift_owners`:
the first store to export under a name owns it); a conflict with another writer's commit
rolls the transaction back and runs it again.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from datetime import date
from typing import Any, TypeVar

import duckdb

from detector.errors import PlanshiftError
from detector.store.lake import BY_DAY

DAY_OF_ENTRY = "log_entries"  # no time of its own: the day and query of its execution

_EXPORTS = (
    "CREATE TABLE IF NOT EXISTS lake.planshift_exports (host VARCHAR NOT NULL, "
    '"table" VARCHAR NOT NULL, day DATE, signature VARCHAR NOT NULL)'
)
_OWNERS = (
    "CREATE TABLE IF NOT EXISTS lake.planshift_owners (host VARCHAR NOT NULL, store_id VARCHAR "
    "NOT NULL, store VARCHAR NOT NULL, machine VARCHAR NOT NULL, claimed_at TIMESTAMP NOT NULL)"
)
_ATTEMPTS = 12
T = TypeVar("T")


def export_host_rows(
    con: Any, tables: Sequence[str], host: str, owner: tuple[str, str, str]
) -> dict[str, int]:
    """The attached store `src` into the lake as `host` (owner: store id, path, machine)."""
    _retried(_create_tables, con, tables)
    return _retried(_export, con, tables, host, owner)


def tables_of(con: Any) -> set[str]:
    rows = con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake'")
    return {str(row[0]) for row in rows.fetchall()}


def _retried(work: Callable[..., T], *arguments: Any) -> T:
    """Run `work` in a transaction, again after a conflict with another writer's commit."""
    for attempt in range(_ATTEMPTS):
        con_error: duckdb.Error | None = None
        try:
            return work(*arguments)
        except duckdb.TransactionException as exc:
            con_error = exc
        except duckdb.Error as exc:
            if "conflict" not in str(exc).lower():
                raise
            con_error = exc
        if attempt == _ATTEMPTS - 1:
            raise PlanshiftError(
                f"the lake's catalog refused the export {_ATTEMPTS} times: {con_error}",
                "other hosts are exporting at the same moment: run the export again",
            )
        time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def _create_tables(con: Any, tables: Sequence[str]) -> None:
    con.execute("BEGIN")
    try:
        con.execute(_EXPORTS)
        con.execute(_OWNERS)
        present = tables_of(con)
        for table in tables:
            columns = con.execute(
                "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = 'src' "
                "AND table_name = ? ORDER BY column_index",
                [table],
            ).fetchall()
            extra = ["lake_host VARCHAR NOT NULL"]
            if dated(table):
                extra.append("lake_day DATE")
            if table == DAY_OF_ENTRY:
                extra.append("lake_query_key VARCHAR")
            wanted = [*extra, *(f'"{name}" {kind}' for name, kind in columns)]
            if table not in present:
                con.execute(f'CREATE TABLE lake."{table}" ({", ".join(wanted)})')
                keys = "lake_host, lake_day" if dated(table) else "lake_host"
                con.execute(f'ALTER TABLE lake."{table}" SET PARTITIONED BY ({keys})')
                continue
            have = {row[0] for row in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE database_name = 'lake' "
                "AND table_name = ?", [table],
            ).fetchall()}  # fmt: skip
            for name, kind in columns:  # a newer planshift's columns: older rows read NULL
                if name not in have:
                    con.execute(f'ALTER TABLE lake."{table}" ADD COLUMN "{name}" {kind}')
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _export(
    con: Any, tables: Sequence[str], host: str, owner: tuple[str, str, str]
) -> dict[str, int]:
    """One transaction: the host's (table, day) parts whose signature changed are replaced,
    when the host name is this store's (the first store to export under it owns it)."""
    con.execute("BEGIN")
    try:
        _claim(con, host, owner)
        counts = {table: _export_table(con, table, host) for table in tables}
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return counts


def _claim(con: Any, host: str, owner: tuple[str, str, str]) -> None:
    found = con.execute(
        "SELECT store_id, store, machine, claimed_at FROM lake.planshift_owners WHERE host = ?",
        [host],
    ).fetchone()
    if found is None:
        con.execute(
            "INSERT INTO lake.planshift_owners VALUES (?, ?, ?, ?, now()::TIMESTAMP)",
            [host, *owner],
        )
    elif found[0] != owner[0]:
        raise PlanshiftError(
            f"host {host} in the lake belongs to another store: {found[1]} on {found[2]} (since "
            f"{found[3]}); this store ({owner[1]}) would replace its rows",
            "export this store under its own name (--source/--name)",
        )


def _export_table(con: Any, table: str, host: str) -> int:
    source, day = _source(table)
    parts = con.execute(
        f"SELECT {day} AS day, count(*), bit_xor(hash(t))::VARCHAR FROM {source} GROUP BY ALL"
    ).fetchall()
    wanted = {part_day: f"{count} {digest}" for part_day, count, digest in parts if count}
    known = dict(con.execute(
        'SELECT day, signature FROM lake.planshift_exports WHERE host = ? AND "table" = ?',
        [host, table],
    ).fetchall())  # fmt: skip
    stale = [d for d in known if wanted.get(d) != known[d]]
    fresh = [d for d in wanted if known.get(d) != wanted[d]]
    for part_day in stale:
        con.execute(
            f'DELETE FROM lake."{table}" WHERE lake_host = ?'
            + (f" AND {_same_day(part_day, 'lake_day')}" if dated(table) else ""),
            [host] + ([part_day] if part_day is not None and dated(table) else []),
        )
        con.execute(
            f'DELETE FROM lake.planshift_exports WHERE host = ? AND "table" = ? AND {_same_day(part_day, "day")}',
            [host, table] + ([part_day] if part_day is not None else []),
        )
    insert = _insert(con, table, source, day)
    for part_day in fresh:
        con.execute(insert, [host, part_day])
        con.execute(
            "INSERT INTO lake.planshift_exports VALUES (?, ?, ?, ?)",
            [host, table, part_day, wanted[part_day]],
        )
    return sum(int(count) for _, count, _ in parts if count)


def _insert(con: Any, table: str, source: str, day: str) -> str:
    """INSERT of one day of a store table (parameters: host, day), sorted by query key."""
    columns = [row[0] for row in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = 'src' AND table_name = ? "
        "ORDER BY column_index", [table],
    ).fetchall()]  # fmt: skip
    names, values = ["lake_host"], ["?"]
    if dated(table):
        names.append("lake_day")
        values.append(day)
    if table == DAY_OF_ENTRY:
        names.append("lake_query_key")
        values.append("o.query_key")
    names += [f'"{c}"' for c in columns]
    values += [f't."{c}"' for c in columns]
    order = {"observations": " ORDER BY t.query_key, t.collected_at",
             DAY_OF_ENTRY: " ORDER BY o.query_key, o.collected_at"}.get(table, "")  # fmt: skip
    return (
        f'INSERT INTO lake."{table}" ({", ".join(names)}) SELECT {", ".join(values)} '
        f"FROM {source} WHERE {day} IS NOT DISTINCT FROM ?::DATE{order}"
    )


def _source(table: str) -> tuple[str, str]:
    """The rows of a store table to export, and the SQL of their day (NULL: not by day)."""
    if table in BY_DAY:
        return f'src."{table}" t', f't."{BY_DAY[table]}"::DATE'
    if table == DAY_OF_ENTRY:
        return (
            f'src."{table}" t LEFT JOIN src.observations o USING (observation_id)',
            "o.collected_at::DATE",
        )
    return f'src."{table}" t', "NULL::DATE"


def dated(table: str) -> bool:
    return table in BY_DAY or table == DAY_OF_ENTRY


def _same_day(part_day: date | None, column: str) -> str:
    return f"{column} IS NULL" if part_day is None else f"{column} = ?"
