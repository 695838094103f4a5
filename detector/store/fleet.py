"""The fleet view's rows in one SQL pass over every host (sql/fleet_flips.sql), on any source.

A source is a connection with three views: fleet_observations (host, observation_id, query_key,
fingerprint, duration_ms, total_cost, collected_at, generic: the logged executions, `generic`
from their log entries, NULL for entries of an older planshift), fleet_plans
(fingerprint, signature, plan_json) and fleet_queries (query_key, name). A lake makes them
over its files (detector.store.lakes), a store over its tables (`store_fleet_source`). The
rows of the window are read once; whether an execution used a prepared statement's generic plan
is its log entry's, else its plan's EXPLAIN JSON's (detector.model.plan), as in a timeline;
then segments and flips are SQL.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from importlib.resources import files
from typing import Any

from detector.model.plan import parse_plan
from detector.model.records import QueryRecord, from_utc_naive, to_utc_naive


@dataclass(frozen=True)
class FlipRow:
    query_key: str
    host: str
    at: datetime
    before_signature: str
    after_signature: str
    before_median_ms: float | None
    after_median_ms: float | None


@dataclass(frozen=True)
class FleetRows:
    flips: list[FlipRow]
    hosts_seen: dict[str, int]  # per query: the hosts that logged it in the window
    names: dict[str, str]


@cache
def _flips_sql() -> str:
    return files("detector.store").joinpath("sql", "fleet_flips.sql").read_text()


def store_fleet_source(con: Any) -> None:
    """The views of a store's own log sources (a target name is a host)."""
    con.execute(
        "CREATE TEMP VIEW fleet_observations AS SELECT t.name AS host, o.observation_id, "
        "o.query_key, o.fingerprint, o.duration_ms, o.total_cost, o.collected_at, e.generic "
        "FROM observations o JOIN targets t USING (target_id) "
        "LEFT JOIN log_entries e USING (observation_id) WHERE t.source = 'log'"
    )
    con.execute(
        "CREATE TEMP VIEW fleet_plans AS SELECT fingerprint, signature, plan_json FROM plans"
    )
    con.execute(
        "CREATE TEMP VIEW fleet_queries AS SELECT query_key, name, sql, queryid FROM queries"
    )


def latest_time(con: Any) -> datetime | None:
    """When the source's last logged execution ran (UTC): what a time of day alone refers to."""
    row = con.execute("SELECT max(collected_at) FROM fleet_observations").fetchone()
    return from_utc_naive(row[0]) if row and row[0] is not None else None


def source_queries(con: Any) -> dict[str, QueryRecord]:
    rows = con.execute(
        "SELECT DISTINCT ON (query_key) query_key, name, sql, queryid FROM fleet_queries "
        "ORDER BY query_key"
    ).fetchall()
    return {row[0]: QueryRecord(*row) for row in rows}


def fleet_rows(
    con: Any,
    since: datetime | None,
    until: datetime | None,
    hosts: Sequence[str] = (),
    query_keys: Collection[str] | None = None,
) -> FleetRows:
    """The window's executions of `hosts` (all when empty) and `query_keys` (all when None),
    read once; their flips, and per query the hosts that logged it."""
    only = "".join(
        f" AND {column} IN ({_listed(values)})"
        for column, values in (("host", hosts), ("query_key", query_keys))
        if values or (column == "query_key" and values is not None)
    )
    con.execute(
        "CREATE TEMP TABLE fleet_rows AS SELECT host, observation_id, query_key, fingerprint, "
        "duration_ms, collected_at, generic FROM fleet_observations "
        "WHERE ($1::TIMESTAMP IS NULL OR collected_at >= $1) "
        f"AND ($2::TIMESTAMP IS NULL OR collected_at < $2){only}",
        [_naive(since), _naive(until)],
    )
    plans = con.execute(
        "SELECT fingerprint, signature, plan_json::VARCHAR FROM fleet_plans "
        "WHERE fingerprint IN (SELECT DISTINCT fingerprint FROM fleet_rows)"
    ).fetchall()
    con.execute(
        "CREATE TEMP TABLE plan_kinds (fingerprint VARCHAR, signature VARCHAR, generic BOOLEAN)"
    )
    if plans:
        columns = list(zip(*plans, strict=True))
        generic = [parse_plan(document).generic for document in columns[2]]
        con.execute(
            "INSERT INTO plan_kinds SELECT unnest($1), unnest($2), unnest($3)",
            [list(columns[0]), list(columns[1]), generic],
        )
    flips = [FlipRow(k, h, from_utc_naive(at), b, a, bm, am) for k, h, at, b, a, bm, am in
             con.execute(_flips_sql()).fetchall()]  # fmt: skip
    seen = dict(con.execute(
        "SELECT query_key, count(DISTINCT host) FROM fleet_rows GROUP BY ALL"
    ).fetchall())  # fmt: skip
    names = dict(con.execute(
        "SELECT query_key, any_value(name) FROM fleet_queries "
        "WHERE query_key IN (SELECT DISTINCT query_key FROM fleet_rows) GROUP BY ALL"
    ).fetchall())  # fmt: skip
    return FleetRows(flips, {str(k): int(v) for k, v in seen.items()}, names)


def _listed(values: Collection[str]) -> str:
    return ", ".join("'" + v.replace("'", "''") + "'" for v in sorted(values)) or "NULL"


def _naive(moment: datetime | None) -> datetime | None:
    return to_utc_naive(moment) if moment is not None else None
