"""Top queries of a time window (what pgBadger users look at first): by total time, calls or
mean time, from the logged executions (auto_explain: each logged plan is one execution, with
its duration) and from pg_stat_statements snapshot deltas (every call, logged or not).

The two sources count differently and are shown side by side, never added: a log holds the
executions above `auto_explain.log_min_duration`, pg_stat_statements all of them, between two
snapshots. A pgss delta belongs to the window when its interval lies inside the window (an
interval that only overlaps it is kept, and says so: its counts cover more than the window).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from detector.engine.timeline.build import PgssDelta
from detector.errors import PlanshiftError
from detector.model.identity import text_query_key
from detector.model.log_rows import LogObservationRow
from detector.model.records import QueryRecord

ORDERS = ("total", "calls", "mean")


@dataclass(frozen=True)
class TopQuery:
    """One query's work in the window, from one source (`log` or `pg_stat_statements`)."""

    source: str
    query_key: str | None  # the query identity (identity.text_query_key); None: text unknown
    name: str
    queryids: tuple[int, ...]
    calls: int
    total_ms: float
    mean_ms: float | None
    median_ms: float | None = None  # logs only: the executions' median
    plans: int | None = None  # logs only: distinct plan shapes in the window
    partial: bool = False  # pgss only: a delta's interval reaches outside the window

    def sort_key(self, order: str) -> tuple[float, str]:
        value = {"total": self.total_ms, "calls": float(self.calls), "mean": self.mean_ms or 0.0}
        return (-value[order], self.name)


@dataclass(frozen=True)
class TopQueries:
    since: datetime | None
    until: datetime | None
    order: str
    logs: list[TopQuery]
    pgss: list[TopQuery]


def check_order(order: str) -> str:
    if order not in ORDERS:
        raise PlanshiftError(f"unknown order {order!r}", f"--by one of {', '.join(ORDERS)}")
    return order


def top_from_logs(
    rows: Sequence[LogObservationRow], queries: dict[str, QueryRecord], order: str, limit: int
) -> list[TopQuery]:
    """Per query, the logged executions of `rows` (the window's log observations)."""
    grouped: dict[str, list[LogObservationRow]] = {}
    for row in rows:
        grouped.setdefault(row.row.query_key, []).append(row)
    found = []
    for key, group in grouped.items():
        durations = [r.row.duration_ms for r in group if r.row.duration_ms is not None]
        total = sum(durations)
        record = queries.get(key)
        found.append(
            TopQuery(
                source="log",
                query_key=key,
                name=record.name if record else key,
                queryids=tuple(sorted({r.queryid for r in group if r.queryid is not None})),
                calls=len(group),
                total_ms=total,
                mean_ms=total / len(durations) if durations else None,
                median_ms=statistics.median(durations) if durations else None,
                plans=len({r.row.fingerprint for r in group}),
            )
        )
    found.sort(key=lambda top: top.sort_key(order))
    return found[:limit]


def top_from_pgss(
    deltas: Sequence[PgssDelta],
    since: datetime | None,
    until: datetime | None,
    order: str,
    limit: int,
) -> list[TopQuery]:
    """Per server and statement, the pg_stat_statements deltas whose interval meets the window."""
    grouped: dict[tuple[str, int], list[PgssDelta]] = {}
    for delta in deltas:
        if (until is None or delta.start < until) and (since is None or delta.end > since):
            grouped.setdefault((delta.source, delta.queryid), []).append(delta)
    found = []
    for (_, queryid), group in grouped.items():
        calls = sum(d.calls for d in group)
        total = sum(d.total_ms for d in group)
        text = next((d.query for d in group if d.query), None)
        partial = any(
            (since is not None and d.start < since) or (until is not None and d.end > until)
            for d in group
        )
        found.append(
            TopQuery(
                source="pg_stat_statements",
                query_key=_key(text),
                name=_name(text, queryid),
                queryids=(queryid,),
                calls=calls,
                total_ms=total,
                mean_ms=total / calls if calls else None,
                partial=partial,
            )
        )
    found.sort(key=lambda top: top.sort_key(order))
    return found[:limit]


def _key(text: str | None) -> str | None:
    return text_query_key(text) if text else None


def _name(text: str | None, queryid: int) -> str:
    if not text:
        return f"queryid {queryid}"
    flat = " ".join(text.split())
    return flat if len(flat) <= 60 else flat[:57] + "..."
