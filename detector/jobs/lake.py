"""Lake jobs: export a host's store after an ingest, and read a lake as one temporary store."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from detector.engine.fleet import FleetQuery, fleet_flips, log_sources
from detector.engine.query_lookup import find_query_keys
from detector.engine.timeline.build import parse_time
from detector.errors import PlanshiftError
from detector.store import Store
from detector.store.lake import check_host, export_host, lake_queries, materialize
from detector.store.locking import print_wait


def export_after_ingest(store_path: Path, lake: Path, host: str) -> int:
    """The host's store into the lake (the files whose rows changed); its observations."""
    return export_host(store_path, lake, check_host(host)).get("observations", 0)


def host_store(lake: Path, host: str) -> Path:
    """The store of `host` for `ingest --lake` / `snapshot --lake` given no --store: one per
    lake and host under the user's data directory ($XDG_DATA_HOME/planshift, else
    ~/.local/share/planshift), never one file in the working directory that every host of a
    collecting box would share."""
    data = os.environ.get("XDG_DATA_HOME", "")
    base = Path(data) if os.path.isabs(data) else Path.home() / ".local" / "share"
    resolved = lake.resolve()
    tag = hashlib.sha256(str(resolved).encode()).hexdigest()[:10]
    return base / "planshift" / "lakes" / f"{resolved.name or 'lake'}-{tag}" / f"{check_host(host)}.duckdb"


@contextmanager
def lake_store(
    lake: Path,
    hosts: Sequence[str] = (),
    since: datetime | None = None,
    until: datetime | None = None,
    query: str | None = None,
    notes: Callable[[str], None] = print_wait,
) -> Iterator[Path]:
    """A temporary store holding the lake's rows of `hosts` (all when empty) on the days the
    window touches, only the executions of `query` when given; removed afterwards. `notes`
    hears of the files skipped (stderr by default)."""
    directory = Path(tempfile.mkdtemp(prefix="planshift-lake-"))
    try:
        path = directory / "lake.duckdb"
        keys = find_query_keys(lake_queries(lake, hosts, notes), query) if query is not None else None
        materialize(
            lake,
            path,
            hosts=hosts,
            since=since.date() if since is not None else None,
            until=until.date() if until is not None else None,
            query_keys=keys,
            notes=notes,
        )
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def store_or_lake(
    store: Path,
    lake: Path | None,
    host: str | None,
    since: str | None,
    until: str | None,
    query: str | None = None,
) -> Iterator[Path]:
    """`store` itself, or with a lake the lake's rows of `host` (all hosts when None) on the
    days of the window (full dates prune; a time of day alone reads every day), and of `query`
    alone when given."""
    if lake is None:
        yield store
        return
    with lake_store(lake, [host] if host else (), _day(since), _day(until), query) as path:
        yield path


def _day(text: str | None) -> datetime | None:
    if text is None or len(text.strip()) < len("2026-01-01"):
        return None  # a time of day: relative to the latest log, which the lake has to say
    return parse_time(text)


def fleet_report(
    *,
    store: Path,
    lake: Path | None,
    hosts: Sequence[str],
    query: str | None,
    since: str | None,
    until: str | None,
) -> tuple[list[FleetQuery], list[str]]:
    """The fleet view over a lake (or a store with several log sources), and the hosts read."""
    with store_or_lake(store, lake, None, since, until, query) as path:
        if lake is None and not path.exists():
            raise PlanshiftError(f"store {path} does not exist", "pass --lake or --store")
        with Store(path, read_only=True) as opened:
            known = log_sources(opened)
            missing = sorted(set(hosts) - set(known))
            if missing:
                raise PlanshiftError(
                    f"no host {', '.join(missing)}", f"hosts: {', '.join(known) or 'none'}"
                )
            chosen = list(hosts) or known
            reference = opened.latest_log_time()
            start = parse_time(since, reference) if since else None
            end = parse_time(until, reference) if until else None
            return fleet_flips(opened, hosts=chosen, query=query, since=start, until=end), chosen
