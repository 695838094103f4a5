"""`planshift timeline --top N`: the window's top queries, on a terminal and as JSON
(format_version 1, schema `timeline-top-v1.schema.json`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from detector.engine.timeline.top import TopQueries, TopQuery
from detector.model.units import fmt_ms

FORMAT_VERSION = 1
_BY = {"total": "total time", "calls": "calls", "mean": "mean time"}


def top_lines(top: TopQueries) -> list[str]:
    """The two tables, logs then pg_stat_statements, as terminal lines."""
    since = f"{top.since:%Y-%m-%d %H:%M:%S}" if top.since else "the first entry"
    until = f"{top.until:%Y-%m-%d %H:%M:%S}" if top.until else "the last entry"
    lines = [f"top queries by {_BY[top.order]}, {since} .. {until} (UTC)", ""]
    lines += _table(
        "from the logs (executions auto_explain logged)",
        top.logs,
        ("calls", "total ms", "mean ms", "median ms", "plans"),
        lambda q: (str(q.calls), fmt_ms(q.total_ms), fmt_ms(q.mean_ms),
                   fmt_ms(q.median_ms), str(q.plans)),
    )  # fmt: skip
    lines += _table(
        "from pg_stat_statements (snapshot deltas, every call)",
        top.pgss,
        ("calls", "total ms", "mean ms", "queryid"),
        lambda q: (str(q.calls), fmt_ms(q.total_ms), fmt_ms(q.mean_ms),
                   str(q.queryids[0]) + ("*" if q.partial else "")),
    )  # fmt: skip
    if any(q.partial for q in top.pgss):
        lines.append("* snapshot interval reaches outside the window: counts cover more than it")
    return lines


def _table(
    title: str,
    rows: Sequence[TopQuery],
    header: tuple[str, ...],
    cells: Callable[[TopQuery], tuple[str, ...]],
) -> list[str]:
    if not rows:
        return [f"{title}: none", ""]
    table = [header, *(cells(q) for q in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    names = ["query", *(q.name for q in rows)]
    lines = [f"{title}:"]
    for name, row in zip(names, table, strict=True):
        numbers = "  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True))
        lines.append(f"  {numbers}  {name}")
    return [*lines, ""]


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
