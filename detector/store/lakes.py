"""What a lake is to the jobs, whatever its layout: `open_lake("DIR")` or `open_lake("ducklake:...")`.

Two layouts, the same commands: a directory of hive-partitioned Parquet files (no dependency
beyond DuckDB: detector.store.lake) and a DuckLake catalog (detector.store.ducklake).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import date
from pathlib import Path
from typing import Any, Protocol

from detector.errors import PlanshiftError
from detector.model.records import QueryRecord
from detector.store import lake as parquet
from detector.store.connection import lake_connection
from detector.store.ducklake import DuckLake, Pick
from detector.store.ducklake_connect import is_ducklake, parse_spec
from detector.store.lake_files import vetted
from detector.store.locking import print_wait


class Lake(Protocol):
    name: str  # as printed: never a password (none is accepted)

    def export_host(self, store_path: Path, host: str) -> dict[str, int]: ...

    def export_hosts(self, stores: Sequence[tuple[Path, str]]) -> dict[str, dict[str, int]]: ...

    def hosts(self) -> list[str]: ...

    def queries(self, hosts: Sequence[str] = ()) -> dict[str, QueryRecord]: ...

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
        """A new store at `into` with the lake's rows of `hosts` (all when empty) on the days
        between `since` and `until`, of `query_keys` alone, or of the keys that `pick` chooses
        among the hosts' queries (one read of the lake for both)."""
        ...

    def reading(self) -> Any:
        """A context manager: a locked-down DuckDB connection to read the lake with."""
        ...

    def fleet_source(
        self,
        con: Any,
        hosts: Sequence[str],
        since: date | None,
        until: date | None,
    ) -> list[str]:
        """On a connection from `reading`: the views of detector.store.fleet (fleet_observations,
        fleet_plans, fleet_queries) over `hosts` (all when empty) on the days asked."""
        ...


def open_lake(text: str, *, data: str | None = None, as_of: str | None = None) -> Lake:
    if is_ducklake(text):
        return DuckLake(parse_spec(text, data, as_of))
    if data is not None or as_of is not None:
        raise PlanshiftError(
            f"--lake-data and --as-of are for a DuckLake lake; {text} is a directory of Parquet files",
            "pass --lake ducklake:CATALOG (see README, Fleets)",
        )
    return ParquetLake(Path(text))


class ParquetLake:
    """The hive-partitioned Parquet directory (detector.store.lake)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.name = str(root)

    def export_host(self, store_path: Path, host: str) -> dict[str, int]:
        return parquet.export_host(store_path, self.root, host)

    def export_hosts(self, stores: Sequence[tuple[Path, str]]) -> dict[str, dict[str, int]]:
        return {host: self.export_host(path, host) for path, host in stores}

    def hosts(self) -> list[str]:
        return parquet.lake_hosts(self.root)

    def queries(self, hosts: Sequence[str] = ()) -> dict[str, QueryRecord]:
        return parquet.lake_queries(self.root, hosts)

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
        if pick is not None:
            query_keys = pick(self.queries(hosts))
        return parquet.materialize(
            self.root, into, hosts=hosts, since=since, until=until, query_keys=query_keys
        )

    def reading(self) -> Any:
        return lake_connection([self.root])

    def fleet_source(
        self,
        con: Any,
        hosts: Sequence[str],
        since: date | None,
        until: date | None,
    ) -> list[str]:
        known = self.hosts()
        missing = sorted(set(hosts) - set(known))
        if missing:
            raise PlanshiftError(
                f"no host {', '.join(missing)} in {self.name}",
                f"hosts in the lake: {', '.join(known) or 'none'}",
            )
        chosen = [h for h in known if not hosts or h in hosts]
        host = r"regexp_extract(filename, '/host=([^/]+)/', 1)"
        files = {
            t: vetted(
                con,
                self.root,
                t,
                parquet.table_files(self.root, t, chosen, since, until),
                print_wait,
            )
            for t in ("observations", "targets", "plans", "queries", "log_entries")
        }
        if not all(files[t] for t in ("observations", "targets", "plans", "queries")):
            con.execute(
                "CREATE TEMP TABLE fleet_observations (host VARCHAR, observation_id BIGINT, "
                "query_key VARCHAR, fingerprint VARCHAR, duration_ms DOUBLE, total_cost DOUBLE, "
                "collected_at TIMESTAMP, generic BOOLEAN)"
            )
            con.execute(
                "CREATE TEMP TABLE fleet_plans (fingerprint VARCHAR, signature VARCHAR, plan_json VARCHAR)"
            )
            con.execute(
                "CREATE TEMP TABLE fleet_queries (query_key VARCHAR, name VARCHAR, sql VARCHAR, queryid BIGINT)"
            )
            return chosen
        modes = _entry_modes(con, files["log_entries"], host)
        con.execute(
            "CREATE TEMP VIEW fleet_observations AS SELECT o.host, o.observation_id, o.query_key, "
            "o.fingerprint, o.duration_ms, o.total_cost, o.collected_at, e.generic FROM "
            f"(SELECT {host} AS host, * EXCLUDE (filename) FROM read_parquet({_list(files['observations'])}, "
            "filename = true, union_by_name = true)) o "
            f"JOIN (SELECT DISTINCT {host} AS host, target_id FROM read_parquet({_list(files['targets'])}, "
            "filename = true, union_by_name = true) WHERE source = 'log') t "
            f"ON t.host = o.host AND t.target_id = o.target_id LEFT JOIN ({modes}) e "
            "ON e.host = o.host AND e.observation_id = o.observation_id"
        )
        con.execute(
            "CREATE TEMP VIEW fleet_plans AS SELECT DISTINCT ON (fingerprint) fingerprint, signature, "
            f"plan_json FROM read_parquet({_list(files['plans'])}, union_by_name = true) ORDER BY fingerprint"
        )
        con.execute(
            "CREATE TEMP VIEW fleet_queries AS SELECT query_key, name, sql, queryid FROM "
            f"read_parquet({_list(files['queries'])}, union_by_name = true)"
        )
        return chosen


def _entry_modes(con: Any, files: Sequence[str], host: str) -> str:
    """A query of each logged execution's plan-cache mode (host, observation_id, generic):
    from the log entries' files, NULL where an older planshift wrote them without it."""
    none = "SELECT NULL::VARCHAR AS host, NULL::BIGINT AS observation_id, NULL::BOOLEAN AS generic LIMIT 0"
    if not files:
        return none
    read = f"read_parquet({_list(files)}, filename = true, union_by_name = true)"
    if "generic" not in {
        row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {read}").fetchall()
    }:
        return none
    return f"SELECT {host} AS host, observation_id, generic FROM {read}"


def _list(files: Sequence[str]) -> str:
    return "[" + ", ".join("'" + _sql(str(f)) + "'" for f in files) + "]"


def _sql(text: str) -> str:
    return text.replace("'", "''")
