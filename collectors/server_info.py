"""What a target was, beyond its version: settings EXPLAIN (SETTINGS) does not show, and the data.

Recorded per target so a user can check that two sides ran on the same data (row counts,
pg_stats correlation of indexed columns) and comparable configurations (checksums, io_method).
"""

from __future__ import annotations

from typing import Any

import psycopg

# Settings that change timings or plans but are not "planner GUCs" listed by EXPLAIN (SETTINGS).
RECORDED_SETTINGS = (
    "data_checksums",
    "io_method",
    "shared_buffers",
    "effective_cache_size",
    "effective_io_concurrency",
    "random_page_cost",
    "seq_page_cost",
    "work_mem",
    "jit",
    "max_parallel_workers_per_gather",
    "track_io_timing",
)
# fixed when the server was compiled (PostgreSQL's "preset options"): part of its build facts
# (detector.model.build), kept apart from the settings a comparison lists as differing
PRESET_OPTIONS = ("block_size", "segment_size", "wal_block_size", "debug_assertions")

_TABLES = """
SELECT c.oid::regclass::text, c.reltuples::bigint, pg_relation_size(c.oid), c.relpages,
       c.relallvisible
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg_toast%'
ORDER BY 1
"""

_INDEXED_COLUMN_CORRELATION = """
SELECT s.schemaname || '.' || s.tablename, s.attname, s.correlation
FROM pg_stats s
WHERE s.schemaname NOT IN ('pg_catalog', 'information_schema')
  AND EXISTS (
    SELECT 1 FROM pg_index i
    JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
    WHERE i.indrelid = (quote_ident(s.schemaname) || '.' || quote_ident(s.tablename))::regclass
      AND a.attname = s.attname)
ORDER BY 1, 2
"""


def describe_server(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    row = conn.execute("SELECT current_setting('server_version_num')::int, version()").fetchone()
    assert row is not None
    info: dict[str, Any] = {"server_version_num": row[0], "version": row[1]}
    names = list(RECORDED_SETTINGS)
    settings = conn.execute(
        "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s) ORDER BY name",
        [names],
    ).fetchall()
    info["settings"] = {name: value for name, value in settings}
    presets = conn.execute(
        "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s) ORDER BY name",
        [list(PRESET_OPTIONS)],
    ).fetchall()
    info["preset_options"] = {name: value for name, value in presets}
    # not a setting but as decisive for a JIT-compiled plan: can this build compile at all?
    jit = conn.execute("SELECT pg_jit_available()").fetchone()
    info["settings"]["jit_available"] = "on" if jit is not None and jit[0] else "off"
    info["tables"] = table_facts(conn)
    return info


def table_facts(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    """Estimated rows, size, pages and all-visible pages (the planner's view of the visibility
    map) per user table, and the correlation of each indexed leading column."""
    tables: dict[str, dict[str, Any]] = {}
    for name, rows, size, pages, visible in conn.execute(_TABLES).fetchall():
        tables[str(name)] = {
            "rows": int(rows),
            "bytes": int(size),
            "pages": int(pages),
            "all_visible_pages": int(visible),
            "correlation": {},
        }
    for qualified, column, correlation in conn.execute(_INDEXED_COLUMN_CORRELATION).fetchall():
        table = qualified.removeprefix("public.")
        entry = tables.get(table) or tables.get(qualified)
        if entry is not None and correlation is not None:
            entry["correlation"][column] = round(float(correlation), 4)
    return tables
