"""`planshift timeline --top N`: the window's top queries, on a terminal and as JSON
(format_version 1, schema `timeline-top-v1.schema.json`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.padding import Padding

from detector.engine.timeline.top import TopQueries, TopQuery
from detector.model.units import fmt_ms
from detector.reports.tables import table

FORMAT_VERSION = 1
_BY = {"total": "total time", "calls": "calls", "mean": "mean time"}


def render_top(top: TopQueries, console: Console) -> None:
    """The two tables, logs then pg_stat_statements."""
    since = f"{top.since:%Y-%m-%d %H:%M:%S}" if top.since else "the first entry"
    until = f"{top.until:%Y-%m-%d %H:%M:%S}" if top.until else "the last entry"
    console.print(f"top queries by {_BY[top.order]}, {since} .. {until} (UTC)\n", markup=False)
    _table(
        console,
        "from the logs (executions auto_explain logged)",
        top.logs,
        ("calls", "total ms", "mean ms", "median ms", "plans"),
        lambda q: (str(q.calls), fmt_ms(q.total_ms), fmt_ms(q.mean_ms),
                   fmt_ms(q.median_ms), str(q.plans)),
    )  # fmt: skip
    console.print()
    _table(
        console,
        "from pg_stat_statements (snapshot deltas, every call)",
        top.pgss,
        ("calls", "total ms", "mean ms", "queryid"),
        lambda q: (str(q.calls), fmt_ms(q.total_ms), fmt_ms(q.mean_ms),
                   str(q.queryids[0]) + ("*" if q.partial else "")),
    )  # fmt: skip
    if any(q.partial for q in top.pgss):
        console.print(
            "* snapshot interval reaches outside the window: counts cover more than it",
            markup=False,
        )


def _table(
    console: Console,
    title: str,
    rows: Sequence[TopQuery],
    header: tuple[str, ...],
    cells: Callable[[TopQuery], tuple[str, ...]],
) -> None:
    if not rows:
        console.print(f"{title}: none", markup=False)
        return
    console.print(f"{title}:", markup=False)
    found = [(*cells(q), q.name) for q in rows]
    numbers = range(len(header))
    console.print(
        Padding(table((*header, "query"), found, numeric=numbers), (0, 0, 0, 2), expand=False)
    )


def top_document(top: TopQueries) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "window": {
            "since": top.since.isoformat() if top.since else None,
            "until": top.until.isoformat() if top.until else None,
        },
        "order": top.order,
        "logs": [_query(q) for q in top.logs],
        "pg_stat_statements": [_query(q) for q in top.pgss],
    }


def _query(query: TopQuery) -> dict[str, Any]:
    found: dict[str, Any] = {
        "query_key": query.query_key,
        "name": query.name,
        "queryids": list(query.queryids),
        "calls": query.calls,
        "total_ms": query.total_ms,
        "mean_ms": query.mean_ms,
    }
    if query.source == "log":
        found.update(median_ms=query.median_ms, plans=query.plans)
    else:
        found["partial"] = query.partial
    return found
