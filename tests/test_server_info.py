"""What a run records of each server: the settings that move the clock, JIT availability, and
the table statistics the planner saw, read from real clusters."""

from __future__ import annotations

import psycopg
from helpers import FreshDb

from collectors.server_info import describe_server
from collectors.servers.embedded import EmbeddedCluster


def test_jit_availability_and_table_statistics_are_recorded(
    pg_any: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    dsn = fresh_db(pg_any)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v int)")
        conn.execute("INSERT INTO t SELECT i, i FROM generate_series(1, 20000) i")
        conn.execute("VACUUM ANALYZE t")
        available = conn.execute("SELECT pg_jit_available()").fetchone()
        info = describe_server(conn)
    assert available is not None
    assert info["settings"]["jit_available"] == ("on" if available[0] else "off")
    assert info["settings"]["data_checksums"] in ("on", "off")
    table = info["tables"]["t"]
    assert table["rows"] == 20000 and table["pages"] > 0
    assert table["all_visible_pages"] == table["pages"]  # just vacuumed
    assert table["correlation"] == {"id": 1.0}
