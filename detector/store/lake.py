"""A fleet's logs in one lake: hive-partitioned Parquet that many hosts write at once.

Layout: `LAKE/<table>/host=<HOST>/[day=<YYYY-MM-DD>/]data.parquet`, a directory per store table;
every table with a time (and log_entries) by day, each day's executions sorted by query key.
Each host ingests into its own store (the ledger that makes re-ingesting idempotent) and
`export_host` brings that host's files up to date with the store: a file per table and day
(one per table for the tables without a time), rewritten only when its rows changed (a
signature beside it) and swapped in by an atomic rename. Hosts never write the same files, so
any number export at once, and a reader sees each file's old or new rows whole. A host name
belongs to the store that first exported under it, and one export of a host runs at a time
(detector.store.lake_owners). Lake reads and exports run DuckDB as locked down as a store's
(detector.store.connection.lake_connection); files that are not what the writers write are
skipped and named (detector.store.lake_files).

Reading: `materialize` builds an ordinary (temporary) store from the lake, for the hosts and
days asked, with every id made unique per host, so timeline, top and compare run on it as on a
single host's store.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Collection, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from detector.errors import PlanshiftError
from detector.model.records import QueryRecord
from detector.store import IDENTITY_TABLES, Store
from detector.store.connection import attach_store, lake_connection
from detector.store.lake_files import vetted
from detector.store.lake_owners import exporting
from detector.store.locking import WaitCallback, print_wait, store_wait, wal_of
from detector.store.schema import user_tables

ID_COLUMNS = ("run_id", "target_id", "observation_id", "snapshot_id", "comparison_id", "file_id")
ID_STRIDE = (
    10**9
)  # host number * stride + the host store's id: unique across hosts (run 2000000001)
# tables partitioned by day (the column their day comes from; log_entries: their execution's)
BY_DAY = {"observations": "collected_at", "log_events": "logged_at", "pgss_snapshots": "taken_at"}
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_LAKE_HINT = "pass a --lake directory this user can write"


def check_host(host: str) -> str:
    if not HOST_NAME.fullmatch(host) or ".." in host:
        raise PlanshiftError(
            f"{host!r} cannot name a host in a lake",
            "use letters, digits, '.', '_' and '-' (it becomes a directory name)",
        )
    return host


def export_host(
    store_path: Path,
    lake: Path,
    host: str,
    *,
    wait: float | None = None,
    on_wait: WaitCallback = print_wait,
) -> dict[str, int]:
    """Bring `host`'s files in the lake up to date with every table of the store (only the
    files whose rows changed are written); rows per table. The host name must be this store's
    (detector.store.lake_owners), and one export of a host runs at a time."""
    check_host(host)
    seconds = store_wait() if wait is None else wait
    with Store(store_path, read_only=True, wait=seconds, on_wait=on_wait) as store:
        tables = store_tables(store)
        store_id = store.store_id
    try:
        lake.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PlanshiftError(f"cannot create lake {lake}: {exc.strerror}", _LAKE_HINT) from exc
    with (
        exporting(lake, host, store_id, store_path, wait=seconds, on_wait=on_wait),
        lake_connection([lake], [store_path, wal_of(store_path)]) as con,
    ):
        attach_store(con, store_path, "src", read_only=True, wait=seconds)
        base = {row[0] for row in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'src'"
        ).fetchall()}  # fmt: skip
        counts = {}
        for table in tables:
            if table not in base:  # a view posing as a store table: never run it
                raise PlanshiftError(
                    f"{store_path}: {table} is not a table", "export a planshift store"
                )
            counts[table] = _export_table(con, lake, table, host)
    return counts


def store_tables(store: Store) -> list[str]:
    """The tables a lake holds: all but the schema's bookkeeping and the store's identity."""
    return sorted(t for t in user_tables(store._con) if t not in IDENTITY_TABLES)


def _export_table(con: Any, lake: Path, table: str, host: str) -> int:
    """Write the table's rows of each day (or all of them) to one file each, skipping the files
    whose rows did not change since the last export (a signature beside each file)."""
    home = lake / table / f"host={host}"
    home.mkdir(parents=True, exist_ok=True)
    source, day, order = _day_source(table)
    parts = con.execute(
        f"SELECT {day} AS day, count(*), bit_xor(hash(t)) FROM {source} GROUP BY ALL"
    ).fetchall()
    wanted = {}
    for part_day, count, digest in parts:
        if not count:
            continue
        folder = home / f"day={part_day}" if part_day is not None else home
        wanted[folder] = (part_day, f"{count} {digest}\n")
    for folder, (part_day, signature) in wanted.items():
        mark = folder / ".signature"
        if mark.is_file() and mark.read_text() == signature:
            continue
        folder.mkdir(exist_ok=True)
        where = f"WHERE {day} = '{part_day}'" if part_day is not None else ""
        staging = folder / f".data.{os.getpid()}.tmp"
        con.execute(
            f"COPY (SELECT t.* FROM {source} {where}{order}) TO '{_sql_path(staging)}' "
            "(FORMAT parquet)"
        )
        os.replace(staging, folder / "data.parquet")  # atomic: readers see old or new rows
        mark.write_text(signature)
    for stale in home.glob("day=*"):  # days the store no longer holds
        if stale not in wanted:
            shutil.rmtree(stale, ignore_errors=True)
    if home not in wanted:
        (home / "data.parquet").unlink(missing_ok=True)
        (home / ".signature").unlink(missing_ok=True)
    return sum(int(count) for _, count, _ in parts if count)


def _day_source(table: str) -> tuple[str, str, str]:
    """The rows of a store table, the SQL of their day (NULL: not by day), their order in a
    file: log_entries take the day of their execution, and one query's rows lie together."""
    if table == "log_entries":
        joined = 'src."log_entries" t LEFT JOIN src.observations o USING (observation_id)'
        return (
            joined,
            "strftime(o.collected_at, '%Y-%m-%d')",
            " ORDER BY o.query_key, o.collected_at",
        )
    source = f'src."{table}" t'
    if table in BY_DAY:
        order = " ORDER BY t.query_key, t.collected_at" if table == "observations" else ""
        return source, f"strftime(t.\"{BY_DAY[table]}\", '%Y-%m-%d')", order
    return source, "NULL", ""


def lake_hosts(lake: Path) -> list[str]:
    runs = lake / "runs"
    if not runs.is_dir():
        raise PlanshiftError(
            f"{lake} is not a planshift lake (no runs/)", "ingest with --lake first"
        )
    return sorted(p.name.removeprefix("host=") for p in runs.glob("host=*") if p.is_dir())


def materialize(
    lake: Path,
    into: Path,
    *,
    hosts: Sequence[str] = (),
    since: date | None = None,
    until: date | None = None,
    query_keys: Collection[str] | None = None,
    notes: WaitCallback = print_wait,
) -> list[str]:
    """A store at `into` (new) holding the lake's rows of `hosts` (all when empty) between the
    days `since` and `until` (inclusive; partitions outside are never read), and only the
    executions of `query_keys` when given. Returns the hosts. Files that are not what the
    lake's writers write (a symlink, wrong column types, not Parquet) are skipped, each
    reported to `notes`."""
    known = lake_hosts(lake)
    missing = sorted(set(hosts) - set(known))
    if missing:
        raise PlanshiftError(
            f"no host {', '.join(missing)} in {lake}",
            f"hosts in the lake: {', '.join(known) or 'none'}",
        )
    chosen = [h for h in known if not hosts or h in hosts]
    with Store(into) as store:
        tables = store_tables(store)
    wal = wal_of(into)
    with lake_connection([lake, into.parent], [into, wal]) as con:
        attach_store(con, into, "dst", read_only=False, wait=0)
        con.execute("CREATE TEMP TABLE lake_hosts (host VARCHAR, host_no BIGINT)")
        con.executemany(
            "INSERT INTO lake_hosts VALUES (?, ?)", [[h, known.index(h) + 1] for h in chosen]
        )
        only = _only_queries(query_keys)
        for table in sorted(tables, key=lambda name: name != "observations"):
            files = vetted(con, lake, table, table_files(lake, table, chosen, since, until), notes)
            _load_table(con, table, files, only.get(table, ""))
    return chosen


def _only_queries(keys: Collection[str] | None) -> dict[str, str]:
    """Per table, the condition that keeps the executions of `keys` alone (loaded in this
    order: observations before the rows that point at them)."""
    if keys is None:
        return {}
    listed = ", ".join("'" + key.replace("'", "''") + "'" for key in sorted(keys)) or "NULL"
    of_kept = "observation_id IN (SELECT observation_id FROM dst.observations)"
    return {"observations": f"query_key IN ({listed})", "log_entries": of_kept}


def table_files(
    lake: Path, table: str, hosts: Sequence[str], since: date | None, until: date | None
) -> list[Path]:
    return [  # each chosen host's directory alone: 1,000 hosts' files are not listed for one
        path
        for host in sorted(set(hosts))
        for path in sorted((lake / table / f"host={host}").glob("**/*.parquet"))
        if _wanted(path.relative_to(lake / table), hosts, since, until)
    ]


def _load_table(con: Any, table: str, files: Sequence[str], condition: str) -> None:
    if not files:
        return
    columns = [row[0] for row in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = 'dst' AND table_name = ? "
        "ORDER BY column_index", [table],
    ).fetchall()]  # fmt: skip
    select = ", ".join(
        f'p."{c}" + h.host_no * {ID_STRIDE} AS "{c}"' if c in ID_COLUMNS else f'p."{c}"'
        for c in columns
    )
    # the directory names the host (no hive_partitioning: runs has a column `host` of its own)
    host = r"regexp_extract(p.filename, '/host=([^/]+)/', 1)"
    names = ", ".join(f'"{c}"' for c in columns)
    source = (
        f"SELECT {select} FROM read_parquet(?, filename = true, union_by_name = true) p "
        f"JOIN lake_hosts h ON h.host = {host}"
    )
    kept = f"SELECT * FROM ({source}) WHERE {condition}" if condition else source
    keyed = con.execute(
        "SELECT count(*) FROM duckdb_constraints() WHERE database_name = 'dst' "
        "AND table_name = ? AND constraint_type = 'PRIMARY KEY'",
        [table],
    ).fetchone()[0]
    # rows with a key (queries, plans: the same on several hosts) are stored once
    verb = "INSERT OR IGNORE" if keyed else "INSERT"
    con.execute(f'{verb} INTO dst."{table}" ({names}) {kept}', [list(files)])


def lake_queries(
    lake: Path, hosts: Sequence[str] = (), notes: WaitCallback = print_wait
) -> dict[str, QueryRecord]:
    """The queries table of the lake's `hosts` (all when empty)."""
    chosen = [h for h in lake_hosts(lake) if not hosts or h in hosts]
    found = [
        path
        for path in sorted((lake / "queries").glob("host=*/*.parquet"))
        if path.parent.name.removeprefix("host=") in chosen
    ]
    if not found:
        return {}
    with lake_connection([lake]) as con:
        files = vetted(con, lake, "queries", found, notes)
        if not files:
            return {}
        rows = con.execute(
            "SELECT DISTINCT ON (query_key) query_key, name, sql, queryid "
            "FROM read_parquet(?, union_by_name = true)",
            [files],
        ).fetchall()
    return {row[0]: QueryRecord(*row) for row in rows}


def _wanted(relative: Path, hosts: Sequence[str], since: date | None, until: date | None) -> bool:
    """`host=H/[day=D/]file.parquet`: a chosen host, and a day inside the range."""
    parts = dict(part.split("=", 1) for part in relative.parts[:-1] if "=" in part)
    if parts.get("host") not in hosts:
        return False
    day = parts.get("day")
    if day is None:
        return True
    return (since is None or day >= since.isoformat()) and (
        until is None or day <= until.isoformat()
    )


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")
