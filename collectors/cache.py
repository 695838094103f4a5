"""Cold-cache trials: evict what a statement reads from shared buffers and the OS page cache.

A cold execution starts with none of its relations' pages cached: PostgreSQL 17+ evicts them
from shared buffers with pg_buffercache_evict() (each buffer of the relations and of their
indexes; a dirty buffer is written out first), and on a server whose data directory is on
this machine planshift then flushes and drops the relation files from the kernel's page cache
with posix_fadvise(POSIX_FADV_DONTNEED), as pgfincore does. What cannot be done is said, not
skipped silently: PostgreSQL 15 and 16 have no eviction function, and a remote server's page
cache is out of reach. `Eviction.describe()` is what the run records per target.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from collectors.servers.targets import Server

# the relations a statement touches, from its plan, with every index on them
RELATIONS = """
SELECT DISTINCT r.oid::regclass::text
FROM unnest(%s::text[]) AS name
JOIN pg_class c ON c.oid = to_regclass(name)
JOIN LATERAL (
    SELECT c.oid UNION ALL SELECT indexrelid FROM pg_index WHERE indrelid = c.oid
) AS r(oid) ON true
"""
EVICT = """
SELECT count(pg_buffercache_evict(b.bufferid))
FROM pg_buffercache b
JOIN pg_class c ON b.relfilenode = pg_relation_filenode(c.oid)
WHERE c.oid = ANY(%s::regclass[])
  AND b.reldatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
"""
FILES = "SELECT pg_relation_filepath(oid) FROM unnest(%s::regclass[]) AS oid"


@dataclass
class Eviction:
    """How cold a side's executions can be made, found once per server."""

    shared_buffers: bool  # pg_buffercache_evict() is there and we may call it
    data_dir: Path | None  # the data directory, when it is on this machine and readable
    why_not: tuple[str, ...] = ()

    def describe(self) -> dict[str, Any]:
        return {
            "mode": "cold",
            "shared_buffers": "evicted" if self.shared_buffers else "not evicted",
            "os_page_cache": "dropped" if self.data_dir is not None else "not dropped",
            "limits": list(self.why_not),
        }

    def evict(self, conn: psycopg.Connection[Any], relations: list[str]) -> None:
        """Make the relations (and their indexes) cold: outside any transaction."""
        if not relations:
            return
        touched = [str(row[0]) for row in conn.execute(RELATIONS, [relations]).fetchall()]
        if self.shared_buffers:
            conn.execute(EVICT, [touched])
        if self.data_dir is not None:
            for (relative,) in conn.execute(FILES, [touched]).fetchall():
                if relative:
                    drop_page_cache(self.data_dir / str(relative))


def drop_page_cache(first_segment: Path) -> None:
    """Flush and drop the kernel's cached pages of a relation file and its 1 GB segments."""
    segment, number = first_segment, 0
    while segment.exists():
        fd = os.open(segment, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        number += 1
        segment = first_segment.with_name(f"{first_segment.name}.{number}")


def prepare_eviction(server: Server, conn: psycopg.Connection[Any]) -> Eviction:
    """What cold trials can do on this server. On an embedded cluster planshift installs
    pg_buffercache; on a --dsn server it uses the extension only if it is already there."""
    version = int(server.info.get("server_version_num") or 0)
    why_not: list[str] = []
    shared = False
    if version < 170000:
        why_not.append(
            f"PostgreSQL {version // 10000} cannot evict shared buffers (pg_buffercache_evict "
            "is 17+): pages the run cached stay in shared buffers"
        )
    else:
        if server.source == "embedded":
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
        row = conn.execute(
            "SELECT to_regproc('pg_buffercache_evict') IS NOT NULL AND "
            "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)"
        ).fetchone()
        shared = bool(row and row[0])
        if not shared:
            why_not.append(
                "shared buffers not evicted: pg_buffercache is not installed in this database "
                "or the role is not a superuser"
            )
    data_dir: Path | None = None
    if server.source == "embedded":
        row = conn.execute("SELECT current_setting('data_directory')").fetchone()
        data_dir = Path(str(row[0])) if row else None
    else:
        why_not.append("the OS page cache of a --dsn server is out of reach: not dropped")
    return Eviction(shared, data_dir, tuple(why_not))
