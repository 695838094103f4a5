"""The top job: a window's top queries from the logs and from pg_stat_statements."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from detector.errors import PlanshiftError
from detector.store import Store

if TYPE_CHECKING:  # imported by the command that uses it
    from detector.engine.timeline.top import TopQueries


def show_top(
    *,
    store_path: Path,
    since: str | None,
    until: str | None,
    source: str | None,
    order: str,
    limit: int,
    console: Console,
) -> TopQueries:
    """Print the window's top queries from the logs and from pg_stat_statements deltas."""
    from detector.engine.timeline.build import parse_window, store_pgss_deltas
    from detector.engine.timeline.top import TopQueries, check_order, top_from_logs, top_from_pgss
    from detector.reports.timeline.top import render_top

    check_order(order)
    if not store_path.exists():
        raise PlanshiftError(f"store {store_path} does not exist", "run `planshift ingest` first")
    with Store(store_path, read_only=True) as store:
        start, end = parse_window(since, until, store.latest_log_time())
        rows = store.log_observations(start, end, None, source)
        logs = top_from_logs(rows, dict(store.queries()), order, limit)
        pgss = top_from_pgss(store_pgss_deltas(store, source), start, end, order, limit)
    if not logs and not pgss:
        raise PlanshiftError(
            "no logged plans or pg_stat_statements deltas in that window",
            "ingest logs with `planshift ingest`, take snapshots with `planshift snapshot`",
        )
    top = TopQueries(start, end, order, logs, pgss)
    render_top(top, console)
    return top
