"""The timeline job: each query's plans over time, with pg_stat_statements around the flips."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from detector.errors import PlanshiftError
from detector.model.identity import text_query_key
from detector.store import Store

if TYPE_CHECKING:  # imported by the command that uses it
    from detector.engine.timeline.build import PgssDelta, QueryTimeline


def show_timeline(
    *,
    store_path: Path,
    query: str | None,
    since: str | None,
    until: str | None,
    source: str | None,
    limit: int,
    console: Console,
) -> list[QueryTimeline]:
    """Print each query's plan segments and flips, with pg_stat_statements around them."""
    from detector.engine.timeline.build import build_timeline, parse_window, store_pgss_deltas
    from detector.reports.timeline.terminal import render_timeline

    if not store_path.exists():
        raise PlanshiftError(f"store {store_path} does not exist", "run `planshift ingest` first")
    with Store(store_path, read_only=True) as store:
        start, end = parse_window(since, until, store.latest_log_time())
        timelines = build_timeline(store, query=query, since=start, until=end, source=source)
        deltas = store_pgss_deltas(store)
    if not timelines:
        raise PlanshiftError(
            "no logged plans in that window", "ingest auto_explain logs with `planshift ingest`"
        )
    attach_pgss(timelines, deltas)
    for timeline in timelines[:limit]:
        render_timeline(timeline, console)
    if len(timelines) > limit:
        console.print(f"... {len(timelines) - limit} more queries (--limit, --query)")
    return timelines


def attach_pgss(timelines: Sequence[QueryTimeline], deltas: Sequence[PgssDelta]) -> None:
    """pgss deltas of the same statement (queryid, else normalized-text fingerprint), kept
    when their interval touches the timeline's time range."""
    keys: dict[str, str] = {}
    for timeline in timelines:
        first, last = timeline.segments[0].start, timeline.segments[-1].end
        for delta in deltas:
            same = delta.queryid in timeline.queryids
            if not same and delta.query:
                if delta.query not in keys:
                    keys[delta.query] = text_query_key(delta.query)
                same = keys[delta.query] == timeline.query_key
            if same and delta.end >= first and delta.start <= last:
                timeline.pgss.append(delta)
