"""Forcing the plan a candidate rejected when no enable_* switch forbids what differs, on real
PostgreSQL 15: partial aggregation. The candidate (parallel_tuple_cost = 5, standing for a server
whose planner dropped partial aggregation, as 18 did for TPC-H Q17 against 17) aggregates the
table in one plain HashAggregate; the baseline gathers the workers' partial aggregates. The plan
methods are the same (a hashed Aggregate, a Seq Scan), so no enable_* can give the baseline's
plan back; parallel_tuple_cost = 0 does, and that is what force_plan finds, checked by EXPLAIN."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import psycopg
from helpers import FreshDb

from collectors.forcing import force_plan, rejected_costs
from collectors.servers.embedded import EmbeddedCluster
from detector.model import fingerprint, parse_plan

SQL = "SELECT k, count(*) FROM t GROUP BY k"


@dataclass
class Planned:
    name: str
    connection: psycopg.Connection[Any]
    gucs: dict[str, str] = field(default_factory=dict)


def test_partial_aggregation_is_forced_with_a_cost_setting(
    pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    with psycopg.connect(fresh_db(pg15), autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE t AS SELECT i AS id, i % 1000 AS k, repeat('x', 200) AS pad "
            "FROM generate_series(1, 200000) i"
        )
        conn.execute("VACUUM ANALYZE t")
        baseline = Planned("baseline", conn)
        candidate = Planned("candidate", conn, {"parallel_tuple_cost": "5"})
        wanted = parse_plan(_explain(conn, SQL))
        assert any(node.partial_mode == "Partial" for _, node in wanted.nodes())
        forced = force_plan(baseline, candidate, SQL, None, fingerprint(wanted), "60s")
        assert forced == {"parallel_tuple_cost": "0"}
        # a plan forced with a cost setting is costed in other units: no near-tie from it
        assert rejected_costs(candidate, SQL, [None], fingerprint(wanted), forced, "60s") == {}


def _explain(conn: psycopg.Connection[Any], sql: str) -> str:
    row = conn.execute("EXPLAIN (FORMAT JSON) " + sql).fetchone()
    assert row is not None
    return json.dumps(row[0])
