"""A fleet's lake on DuckLake: a catalog (PostgreSQL or a DuckDB file) over Parquet data files.

Writing: detector.store.ducklake_export (tables with `lake_host` and `lake_day`, partitioned by
host and day, each day sorted by query key; one catalog transaction per host, retried on a
conflict). Reading: one query's fleet view over some days reads those days' files and, in them,
the row groups of that query (DuckLake prunes files by partition values and column statistics);
`materialize` fills a temporary store like the Parquet lake's. Every commit is a snapshot:
`--as-of` attaches the lake as it was at a snapshot id or a time.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Collection, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from detector.errors import PlanshiftError
from detector.model.records import QueryRecord
from detector.store import Store
from detector.store.ducklake_connect import DuckLakeSpec, attached
from detector.store.ducklake_export import DAY_OF_ENTRY, dated, export_host_rows, tables_of
from detector.store.lake import ID_COLUMNS, ID_STRIDE, check_host, store_tables

Pick = Callable[[dict[str, QueryRecord]], Collection[str]]  # the query keys to read


class DuckLake:
    """The Lake of a DuckLake catalog (see detector.store.lakes.Lake)."""

    def __init__(self, spec: DuckLakeSpec) -> None:
        self.spec = spec
        self.name = spec.name

    # -- writing ---------------------------------------------------------------------------

    def export_host(self, store_path: Path, host: str) -> dict[str, int]:
        return self.export_hosts([(store_path, host)])[host]

    def export_hosts(self, stores: Sequence[tuple[Path, str]]) -> dict[str, dict[str, int]]:
        """Each (store, host) into the lake over one connection, one transaction per host."""
        tables, owners = {}, {}
        for store_path, host in stores:
            check_host(host)
            with Store(store_path, read_only=True) as store:
                tables[host] = store_tables(store)
                owners[host] = store.store_id
        files = [f for p, _ in stores for f in (p, p.with_name(p.name + ".wal"))]
        counts = {}
        with attached(self.spec, write=True, files=files) as con:
            for store_path, host in stores:
                con.execute(f"ATTACH '{_sql(store_path.resolve())}' AS src (READ_ONLY)")
                try:
                    kinds = {row[0] for row in con.execute(
                        "SELECT table_name FROM duckdb_tables() WHERE database_name = 'src'"
                    ).fetchall()}  # fmt: skip
                    for table in tables[host]:
                        if table not in kinds:  # a view posing as a store table: never run it
                            raise PlanshiftError(
                                f"{store_path}: {table} is not a table", "export a planshift store"
                            )
                    owner = (owners[host], str(store_path.resolve()), socket.gethostname())
                    counts[host] = export_host_rows(con, tables[host], host, owner)
                finally:
                    con.execute("DETACH src")
        return counts

    # -- reading ---------------------------------------------------------------------------

    def hosts(self) -> list[str]:
        with attached(self.spec, write=False) as con:
            return _hosts(con)

    def queries(self, hosts: Sequence[str] = ()) -> dict[str, QueryRecord]:
        with attached(self.spec, write=False) as con:
            return _queries(con, _chosen(con, self.name, hosts))

    def materialize(
        self,
        into: Path,
        *,
        hosts: Sequence[str] = (),
        since: date | None = None,
        until: date | None = None,
        query_keys: Collection[str] | None = None,
        pick: Pick | None = None,
    ) -> list[str]:
        with Store(into) as store:
            tables = store_tables(store)
        files = [into, into.with_name(into.name + ".wal")]
        with attached(self.spec, write=False, files=files) as con:
            known = _hosts(con)
            chosen = _chosen(con, self.name, hosts, known)
            if pick is not None:
                query_keys = pick(_queries(con, chosen))
            present: dict[str, set[str]] = {}
            for table, column in con.execute(
                "SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = 'lake'"
            ).fetchall():
                present.setdefault(table, set()).add(column)
            con.execute(f"ATTACH '{_sql(into.resolve())}' AS dst")
            con.execute("CREATE TEMP TABLE lake_hosts (host VARCHAR, host_no BIGINT)")
            con.executemany(
                "INSERT INTO lake_hosts VALUES (?, ?)", [[h, known.index(h) + 1] for h in chosen]
            )
            for table in tables:
                if table in present:
                    _load(con, table, present[table], since, until, query_keys)
        return chosen

    def fleet_source(
        self,
        con: Any,
        hosts: Sequence[str],
        since: date | None,
        until: date | None,
    ) -> list[str]:
        """On a connection from `reading`: the views of detector.store.fleet over the hosts
        and days asked (a query filter on them reaches DuckLake's file pruning)."""
        chosen = _chosen(con, self.name, hosts)
        where = [_in("p.lake_host", chosen), *_days(since, until)]
        con.execute(
            "CREATE TEMP VIEW fleet_observations AS SELECT p.lake_host AS host, p.observation_id, p.query_key, "
            "p.fingerprint, p.duration_ms, p.total_cost, p.collected_at, e.generic FROM lake.observations p "
            f"JOIN (SELECT DISTINCT target_id, lake_host FROM lake.targets WHERE source = 'log' AND "
            f"{_in('lake_host', chosen)}) t ON t.lake_host = p.lake_host AND t.target_id = p.target_id "
            f"LEFT JOIN ({_entry_modes(con, chosen, since, until)}) e ON e.lake_host = p.lake_host "
            "AND e.lake_day = p.lake_day AND e.lake_query_key = p.query_key "
            f"AND e.observation_id = p.observation_id WHERE {' AND '.join(where)}"
        )
        con.execute(
            "CREATE TEMP VIEW fleet_plans AS SELECT DISTINCT ON (fingerprint) fingerprint, "
            f"signature, plan_json FROM lake.plans WHERE {_in('lake_host', chosen)} ORDER BY fingerprint"
        )
        con.execute(
            "CREATE TEMP VIEW fleet_queries AS SELECT query_key, name, sql, queryid FROM lake.queries "
            f"WHERE {_in('lake_host', chosen)}"
        )
        return chosen

    def reading(self) -> Any:
        return attached(self.spec, write=False)

    def snapshots(self) -> list[tuple[int, str, str]]:
        """The lake's snapshots: id, time (UTC), what changed."""
        with attached(self.spec, write=False) as con:
            rows = con.execute(
                "SELECT snapshot_id, strftime(snapshot_time AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%fZ'), "
                "changes::VARCHAR FROM lake.snapshots() ORDER BY snapshot_id"
            ).fetchall()
        return [(int(s), str(t), str(c)) for s, t, c in rows]


def _load(
    con: Any,
    table: str,
    present: set[str],
    since: date | None,
    until: date | None,
    keys: Collection[str] | None,
) -> None:
    columns = [row[0] for row in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = 'dst' AND table_name = ? "
        "ORDER BY column_index", [table],
    ).fetchall()]  # fmt: skip
    select = ", ".join(
        (f'p."{c}" + h.host_no * {ID_STRIDE}' if c in ID_COLUMNS else f'p."{c}"')
        if c in present
        else "NULL"
        for c in columns
    )
    where = _days(since, until) if dated(table) else []
    if keys is not None and table in ("observations", DAY_OF_ENTRY):
        column = "p.lake_query_key" if table == DAY_OF_ENTRY else "p.query_key"
        where.append(_in(column, sorted(keys)))
    keyed = con.execute(
        "SELECT count(*) FROM duckdb_constraints() WHERE database_name = 'dst' "
        "AND table_name = ? AND constraint_type = 'PRIMARY KEY'",
        [table],
    ).fetchone()[0]
    verb = "INSERT OR IGNORE" if keyed else "INSERT"  # queries, plans: the same on many hosts
    names = ", ".join(f'"{c}"' for c in columns)
    con.execute(
        f'{verb} INTO dst."{table}" ({names}) SELECT {select} FROM lake."{table}" p '
        f"JOIN lake_hosts h ON h.host = p.lake_host {'WHERE ' + ' AND '.join(where) if where else ''}"
    )


def _entry_modes(con: Any, chosen: Sequence[str], since: date | None, until: date | None) -> str:
    """A query of each logged execution's plan-cache mode, joined on the columns DuckLake
    prunes by (host, day, query); NULL where an older planshift's lake lacks the column."""
    has = con.execute(
        "SELECT count(*) FROM duckdb_columns() WHERE database_name = 'lake' "
        f"AND table_name = '{DAY_OF_ENTRY}' AND column_name = 'generic'"
    ).fetchone()[0]
    if not has:
        return (
            "SELECT NULL::VARCHAR AS lake_host, NULL::DATE AS lake_day, NULL::VARCHAR AS lake_query_key, "
            "NULL::BIGINT AS observation_id, NULL::BOOLEAN AS generic LIMIT 0"
        )
    where = " AND ".join([_in("p.lake_host", chosen), *_days(since, until)])
    return (
        "SELECT p.lake_host, p.lake_day, p.lake_query_key, p.observation_id, p.generic "
        f"FROM lake.{DAY_OF_ENTRY} p WHERE {where}"
    )


def _days(since: date | None, until: date | None) -> list[str]:
    found = []
    if since is not None:
        found.append(f"p.lake_day >= DATE '{since.isoformat()}'")
    if until is not None:
        found.append(f"p.lake_day <= DATE '{until.isoformat()}'")
    return found


def _in(column: str, values: Sequence[str]) -> str:
    listed = ", ".join("'" + v.replace("'", "''") + "'" for v in values)
    return f"{column} IN ({listed})" if values else "false"


def _queries(con: Any, chosen: Sequence[str]) -> dict[str, QueryRecord]:
    if "queries" not in tables_of(con):
        return {}
    rows = con.execute(
        "SELECT DISTINCT ON (query_key) query_key, name, sql, queryid FROM lake.queries "
        f"WHERE {_in('lake_host', chosen)} ORDER BY query_key, lake_host"
    ).fetchall()
    return {row[0]: QueryRecord(*row) for row in rows}


def _hosts(con: Any) -> list[str]:
    if "planshift_exports" not in tables_of(con):
        return []
    rows = con.execute("SELECT DISTINCT host FROM lake.planshift_exports ORDER BY host")
    return [str(row[0]) for row in rows.fetchall()]


def _chosen(
    con: Any, name: str, hosts: Sequence[str], known: Sequence[str] | None = None
) -> list[str]:
    known = _hosts(con) if known is None else known
    if not known:
        raise PlanshiftError(f"{name} holds no host yet", "ingest with --lake first")
    missing = sorted(set(hosts) - set(known))
    if missing:
        raise PlanshiftError(
            f"no host {', '.join(missing)} in {name}", f"hosts in the lake: {', '.join(known)}"
        )
    return [h for h in known if not hosts or h in hosts]


def _sql(path: Path) -> str:
    return str(path).replace("'", "''")
