"""Lake jobs: export a host's store after an ingest, and read a lake as one temporary store."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from detector.store.lake import check_host, export_host, materialize


def export_after_ingest(store_path: Path, lake: Path, host: str) -> int:
    """The host's whole store into the lake (its previous export replaced); observations sent."""
    return export_host(store_path, lake, check_host(host)).get("observations", 0)


@contextmanager
def lake_store(
    lake: Path,
    hosts: Sequence[str] = (),
    since: datetime | None = None,
    until: datetime | None = None,
) -> Iterator[Path]:
    """A temporary store holding the lake's rows of `hosts` (all when empty) on the days the
    window touches; removed afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="planshift-lake-"))
    try:
        path = directory / "lake.duckdb"
        materialize(
            lake,
            path,
            hosts=hosts,
            since=since.date() if since is not None else None,
            until=until.date() if until is not None else None,
        )
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)
