"""The census job: which plan each target used, read from the store."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from detector.engine.census import QueryCensus, build_census
from detector.engine.comparison.compare import resolve_side
from detector.errors import PlanshiftError
from detector.store import Store


def census_from_store(
    store_path: Path, run_id: int | None, query: str | None, targets: Sequence[str]
) -> list[QueryCensus]:
    with Store(store_path, read_only=True) as store:
        run = store.run_or_latest(run_id)
        records = store.targets([run])
        if not records:
            raise PlanshiftError(f"run {run} not found in {store_path}", "see `planshift runs`")
        if targets:
            records = [resolve_side(store, name, run) for name in targets]
        censuses = build_census(store, records, query)
    if not censuses:
        raise PlanshiftError(f"no observations for {query or 'any query'} in run {run}")
    return censuses
