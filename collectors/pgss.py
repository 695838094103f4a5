"""pg_stat_statements snapshots: read the view's cumulative counters from a server.

Columns differ by version (13: total_exec_time, plans; 14: toplevel, pg_stat_statements_info;
17: shared_blk_read_time instead of blk_read_time): the reader asks the view which columns it
has. Deltas between snapshots, with resets and evictions, are computed when reading
(`detector.engine.timeline.build.pgss_deltas`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

import psycopg

from collectors.logs.redact import anonymize_sql, redact_passwords
from collectors.servers.targets import check_conninfo, redact_conninfo, redact_secrets
from detector.errors import PlanshiftError
from detector.model.records import PgssEntry

VIEW_SQL = (
    "SELECT current_setting('server_version_num')::int, now(), "
    "to_regclass('pg_stat_statements')::text, "
    "(SELECT extnamespace::regnamespace::text FROM pg_extension "
    " WHERE extname = 'pg_stat_statements')"
)
INFO_SQL = "SELECT dealloc, stats_reset FROM {schema}.pg_stat_statements_info"
COLUMNS_SQL = "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
# PgssEntry field -> view columns to try, newest name first
_COLUMNS: dict[str, tuple[str, ...]] = {
    "queryid": ("queryid",),
    "calls": ("calls",),
    "total_exec_time": ("total_exec_time", "total_time"),
    "query": ("query",),
    "userid": ("userid",),
    "dbid": ("dbid",),
    "toplevel": ("toplevel",),
    "mean_exec_time": ("mean_exec_time", "mean_time"),
    "min_exec_time": ("min_exec_time", "min_time"),
    "max_exec_time": ("max_exec_time", "max_time"),
    "stddev_exec_time": ("stddev_exec_time", "stddev_time"),
    "plans": ("plans",),
    "total_plan_time": ("total_plan_time",),
    "rows": ("rows",),
    "shared_blks_hit": ("shared_blks_hit",),
    "shared_blks_read": ("shared_blks_read",),
    "shared_blks_dirtied": ("shared_blks_dirtied",),
    "shared_blks_written": ("shared_blks_written",),
    "temp_blks_read": ("temp_blks_read",),
    "temp_blks_written": ("temp_blks_written",),
    "blk_read_time": ("shared_blk_read_time", "blk_read_time"),
    "blk_write_time": ("shared_blk_write_time", "blk_write_time"),
}


@dataclass(frozen=True)
class PgssRead:
    taken_at: datetime
    server_version_num: int
    entries: tuple[PgssEntry, ...]
    dealloc: int | None
    stats_reset: datetime | None
    redacted_dsn: str
    # the statement that read the view (capture leaves it out of a workload); not a fact of
    # the snapshot itself: not compared, not kept in its JSON
    sql: str = field(default="", compare=False)


def read_as_json(read: PgssRead) -> dict[str, Any]:
    """A read as a JSON document (a fixture of snapshots taken from a real server)."""
    return {
        "taken_at": read.taken_at.isoformat(),
        "server_version_num": read.server_version_num,
        "entries": [asdict(entry) for entry in read.entries],
        "dealloc": read.dealloc,
        "stats_reset": read.stats_reset.isoformat() if read.stats_reset else None,
        "redacted_dsn": read.redacted_dsn,
    }


def read_from_json(document: dict[str, Any]) -> PgssRead:
    """The read `read_as_json` wrote."""
    reset = document["stats_reset"]
    return PgssRead(
        taken_at=datetime.fromisoformat(document["taken_at"]),
        server_version_num=int(document["server_version_num"]),
        entries=tuple(PgssEntry(**entry) for entry in document["entries"]),
        dealloc=document["dealloc"],
        stats_reset=datetime.fromisoformat(reset) if reset else None,
        redacted_dsn=str(document["redacted_dsn"]),
    )


def connect(dsn: str) -> psycopg.Connection[Any]:
    check_conninfo(dsn, "--target")
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise PlanshiftError(
            f"cannot connect to {redact_conninfo(dsn)}: {redact_secrets(str(exc).strip(), dsn)}",
            "check the DSN (a password belongs in PGPASSWORD or ~/.pgpass)",
        ) from None


def read_pgss(conn: psycopg.Connection[Any], *, anonymize: bool = False) -> PgssRead:
    """One consistent read of pg_stat_statements (and _info on 14+). A statement that sets a
    password keeps its counters, its text the password redacted; `anonymize`: every text
    normalized (utility statements keep their literals in the view)."""
    row = conn.execute(VIEW_SQL).fetchone()
    assert row is not None
    version, taken_at, view, schema = row
    if schema is None:
        raise PlanshiftError(
            "pg_stat_statements is not installed in this database",
            "CREATE EXTENSION pg_stat_statements; (the library must be in "
            "shared_preload_libraries: `planshift setup-check` shows the settings)",
        )
    relation = view or f"{schema}.pg_stat_statements"
    available = {name for (name,) in conn.execute(COLUMNS_SQL, [relation]).fetchall()}
    fields, selects = [], []
    for entry_field, candidates in _COLUMNS.items():
        name = next((c for c in candidates if c in available), None)
        if name is not None:
            fields.append(entry_field)
            selects.append(name)
    sql = f"SELECT {', '.join(selects)} FROM {relation} WHERE queryid IS NOT NULL"
    try:
        rows = conn.execute(sql).fetchall()
    except psycopg.Error as exc:
        raise PlanshiftError(
            f"cannot read pg_stat_statements: {str(exc).strip()}",
            "is pg_stat_statements in shared_preload_libraries? (needs a restart)",
        ) from exc
    scrub = anonymize_sql if anonymize else redact_passwords
    entries = tuple(
        _scrubbed(PgssEntry(**_typed(dict(zip(fields, r, strict=True)))), scrub) for r in rows
    )
    dealloc = stats_reset = None
    if version >= 140000:
        info = conn.execute(INFO_SQL.format(schema=schema))
        found = info.fetchone()
        if found is not None:
            dealloc, stats_reset = found
    dsn = redact_conninfo(conn.info.dsn)
    return PgssRead(taken_at, version, entries, dealloc, stats_reset, dsn, sql)


def _scrubbed(entry: PgssEntry, scrub: Callable[[str], str]) -> PgssEntry:
    if not entry.query:
        return entry
    query = scrub(entry.query)
    return entry if query == entry.query else replace(entry, query=query)


def _typed(values: dict[str, Any]) -> dict[str, Any]:
    for name in ("total_exec_time", "mean_exec_time", "min_exec_time", "max_exec_time"):
        if values.get(name) is not None:
            values[name] = float(values[name])
    for name in ("stddev_exec_time", "total_plan_time", "blk_read_time", "blk_write_time"):
        if values.get(name) is not None:
            values[name] = float(values[name])
    return values
