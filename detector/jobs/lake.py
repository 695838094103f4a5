"""Lake jobs: export a host's store after an ingest, read a lake as one temporary store, and the
fleet view (one SQL pass over the hosts). A lake is a directory of Parquet files or
`ducklake:CATALOG` (detector.store.lakes)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from detector.engine.fleet import FleetQuery, fleet_queries, log_sources
from detector.engine.query_lookup import find_query_keys
from detector.engine.timeline.build import parse_time, parse_window
from detector.errors import PlanshiftError
from detector.store import Store
from detector.store.ducklake_connect import is_ducklake
from detector.store.fleet import fleet_rows, latest_time, source_queries, store_fleet_source
from detector.store.lake import check_host
from detector.store.lakes import Lake, open_lake


def export_after_ingest(
    store_path: Path, lake: str | Path, host: str, data: str | None = None
) -> int:
    """The host's store into the lake (the parts whose rows changed); its observations."""
    return (
        open_lake(str(lake), data=data)
        .export_host(store_path, check_host(host))
        .get("observations", 0)
    )


def lake_name(lake: str | Path) -> str:
    return open_lake(str(lake)).name


def host_store(lake: str | Path, host: str) -> Path:
    """The store of `host` for `ingest --lake` / `snapshot --lake` given no --store: one per
    lake and host under the user's data directory ($XDG_DATA_HOME/planshift, else
    ~/.local/share/planshift), never one file in the working directory that every host of a
    collecting box would share. A DuckLake lake is named by its catalog (never a password)."""
    data = os.environ.get("XDG_DATA_HOME", "")
    base = Path(data) if os.path.isabs(data) else Path.home() / ".local" / "share"
    name = open_lake(str(lake)).name
    if is_ducklake(name):
        label, key = "ducklake", name
    else:
        resolved = Path(name).resolve()
        label, key = resolved.name or "lake", str(resolved)
    tag = hashlib.sha256(key.encode()).hexdigest()[:10]
    return base / "planshift" / "lakes" / f"{label}-{tag}" / f"{check_host(host)}.duckdb"


@contextmanager
def lake_store(
    lake: Lake,
    hosts: Sequence[str] = (),
    since: datetime | None = None,
    until: datetime | None = None,
    query: str | None = None,
) -> Iterator[Path]:
    """A temporary store holding the lake's rows of `hosts` (all when empty) on the days the
    window touches, only the executions of `query` when given; removed afterwards (the lake's
    files that are not what its writers write are skipped and named on stderr)."""
    directory = Path(tempfile.mkdtemp(prefix="planshift-lake-"))
    try:
        path = directory / "lake.duckdb"
        lake.materialize(
            path,
            hosts=hosts,
            since=since.date() if since is not None else None,
            until=until.date() if until is not None else None,
            pick=(lambda queries: find_query_keys(queries, query)) if query is not None else None,
        )
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def store_or_lake(
    store: Path,
    lake: str | Path | None,
    host: str | None,
    since: str | None,
    until: str | None,
    query: str | None = None,
    as_of: str | None = None,
) -> Iterator[Path]:
    """`store` itself, or with a lake the lake's rows of `host` (all hosts when None) on the
    days of the window (full dates prune; a time of day alone reads every day), and of `query`
    alone when given; `as_of`: the lake as it was then (DuckLake)."""
    if lake is None:
        if as_of is not None:
            raise PlanshiftError("--as-of reads a lake's snapshot", "pass --lake ducklake:CATALOG")
        yield store
        return
    opened = open_lake(str(lake), as_of=as_of)
    with lake_store(opened, [host] if host else (), _day(since), _day(until), query) as path:
        yield path


def _day(text: str | None) -> datetime | None:
    if text is None or len(text.strip()) < len("2026-01-01"):
        return None  # a time of day: relative to the latest log, which the lake has to say
    return parse_time(text)


def fleet_report(
    *,
    store: Path,
    lake: str | Path | None,
    hosts: Sequence[str],
    query: str | None,
    since: str | None,
    until: str | None,
    as_of: str | None = None,
) -> tuple[list[FleetQuery], list[str]]:
    """The fleet view over a lake (or a store with several log sources), and the hosts read:
    every host's executions of the window read once, flips computed in SQL."""
    if lake is None:
        if as_of is not None:
            raise PlanshiftError("--as-of reads a lake's snapshot", "pass --lake ducklake:CATALOG")
        if not store.exists():
            raise PlanshiftError(f"store {store} does not exist", "pass --lake or --store")
        with Store(store, read_only=True) as opened:
            known = log_sources(opened)
            missing = sorted(set(hosts) - set(known))
            if missing:
                raise PlanshiftError(
                    f"no host {', '.join(missing)}", f"hosts: {', '.join(known) or 'none'}"
                )
            chosen = list(hosts) or known
            con = opened._con
            store_fleet_source(con)
            return _fleet(con, chosen, query, since, until), chosen
    opened_lake = open_lake(str(lake), as_of=as_of)
    with opened_lake.reading() as con:
        start, end = _day(since), _day(until)
        chosen = opened_lake.fleet_source(
            con, hosts, start.date() if start else None, end.date() if end else None
        )
        return _fleet(con, chosen, query, since, until), chosen


def _fleet(
    con: object, hosts: Sequence[str], query: str | None, since: str | None, until: str | None
) -> list[FleetQuery]:
    keys = find_query_keys(source_queries(con), query) if query is not None else None
    reference = latest_time(con) if _needs_reference(since, until) else None
    start, end = parse_window(since, until, reference)
    return fleet_queries(fleet_rows(con, start, end, hosts, keys))


def _needs_reference(*texts: str | None) -> bool:
    return any(t is not None and _day(t) is None for t in texts)
