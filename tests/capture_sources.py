"""A "production" database to capture from, on a real cluster: the application's queries with
extract/date/interval constants, production settings at the server, database and role levels,
a DBA's monitoring and a planshift snapshot in pg_stat_statements, every plan logged by
auto_explain. Used by tests/test_capture_upgrade.py and the README's upgrade example."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from typer.testing import CliRunner

from collectors.servers.embedded import EmbeddedCluster
from detector.cli.app import app

SCHEMA = """
CREATE TABLE orders (o_orderkey int PRIMARY KEY, o_custkey int NOT NULL,
                     o_orderdate date NOT NULL, o_totalprice numeric(12, 2) NOT NULL);
INSERT INTO orders SELECT i, i % 997, date '1992-01-01' + (i * 7919) % 2400, (i % 1000) * 3.5
FROM generate_series(1, 40000) i;
CREATE INDEX orders_date ON orders (o_orderdate);
ANALYZE orders;
"""
# the application (simple protocol: the constants are in the logged text)
APPLICATION = (
    "SELECT extract(year FROM o_orderdate) AS o_year, sum(o_totalprice) FROM orders "
    "GROUP BY o_year ORDER BY o_year",
    "SELECT count(*) FROM orders WHERE o_orderdate >= date '1995-01-01' "
    "AND o_orderdate < date '1995-01-01' + interval '3' month",
    "SELECT o_custkey, sum(o_totalprice) FROM orders "
    "WHERE o_orderdate <= date '1998-12-01' - interval '90 days' GROUP BY o_custkey",
)
# the DBA's monitoring: blk_read_time is shared_blk_read_time from 17 on
MONITORING = (
    "SELECT queryid, calls, blk_read_time FROM pg_stat_statements ORDER BY calls DESC LIMIT 5",
    "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'",
)
# server level: reset when the source is dropped (the cluster is shared by the session's tests)
SERVER_SETTINGS = {"effective_cache_size": "2GB"}


@contextmanager
def upgrade_source(
    cluster: EmbeddedCluster, scratch: Path, database: str | None = None, role: str | None = None
) -> Iterator[str]:
    """The DSN of a new database on `cluster` that ran the load; dropped afterwards, with its
    role and the server-level settings it set. `scratch`: a directory for the snapshot's store;
    names are unique unless given."""
    suffix = uuid.uuid4().hex[:8]
    database, role = database or f"shop_{suffix}", role or f"app_{suffix}"
    with psycopg.connect(cluster.conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        for name, value in SERVER_SETTINGS.items():
            conn.execute(
                sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
            )
        conn.execute("SELECT pg_reload_conf()")
        for statement in (
            "ALTER DATABASE {db} SET work_mem = '16MB'",
            "ALTER DATABASE {db} SET auto_explain.log_min_duration = 0",
            "ALTER DATABASE {db} SET auto_explain.log_format = 'json'",
            "ALTER ROLE {role} IN DATABASE {db} SET random_page_cost = 1.1",
        ):
            conn.execute(
                sql.SQL(statement).format(db=sql.Identifier(database), role=sql.Identifier(role))
            )
    dsn = make_conninfo(cluster.conninfo, dbname=database)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
            conn.execute(SCHEMA)
            conn.execute(sql.SQL("GRANT SELECT ON orders TO {}").format(sql.Identifier(role)))
            conn.execute("SELECT pg_stat_statements_reset()")
        with psycopg.connect(make_conninfo(dsn, user=role), autocommit=True) as conn:
            for _ in range(5):
                for statement in APPLICATION:
                    conn.execute(statement)
        marker = f"end of the load {suffix}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            for _ in range(3):
                for statement in MONITORING:
                    conn.execute(statement)
            conn.execute(sql.SQL("SELECT {}").format(sql.Literal(marker)))
        deadline = time.monotonic() + 30
        while marker not in cluster.log_path.read_text(errors="replace"):
            assert time.monotonic() < deadline, "the load's last entry never reached the log"
            time.sleep(0.05)
        # planshift's own read of pg_stat_statements, as a cron snapshot leaves it there
        store = str(scratch / "snapshots.duckdb")
        snapshot = CliRunner().invoke(app, ["snapshot", "--target", dsn, "-s", store])
        assert snapshot.exit_code == 0, snapshot.output
        yield dsn
    finally:
        with psycopg.connect(cluster.conninfo, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
            )
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
            for name in SERVER_SETTINGS:
                conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(name)))
            conn.execute("SELECT pg_reload_conf()")
