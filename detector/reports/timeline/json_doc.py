"""`planshift timeline --format json`: plan segments and flips per logged query (format_version 1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from detector.engine.timeline.build import PgssDelta, QueryTimeline, Segment
from detector.engine.timeline.causes import FlipCause
from detector.model.comparison import WindowEvent

FORMAT_VERSION = 1


def timeline_document(timelines: Sequence[QueryTimeline]) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "queries": [
            {
                "query_key": timeline.query_key,
                "name": timeline.name,
                "queryids": sorted(timeline.queryids),
                "observations": timeline.observations,
                "bucketed": timeline.bucketed,
                "flips": len(timeline.flips),
                "flip_causes": [
                    _flip(after, causes)
                    for (_, after), causes in zip(timeline.flips, timeline.causes, strict=False)
                ],
                "segments": [_segment(segment) for segment in timeline.segments],
                "pg_stat_statements": [_delta(delta) for delta in timeline.pgss],
            }
            for timeline in timelines
        ],
    }


def _segment(segment: Segment) -> dict[str, Any]:
    return {
        "fingerprint": segment.fingerprint,
        "signature": segment.signature,
        "start": segment.start.isoformat(),
        "end": segment.end.isoformat(),
        "count": segment.count,
        "median_ms": segment.median_ms,
        "p90_ms": segment.p90_ms,
        "median_cost": segment.median_cost,
        "share": segment.share,
        "generic": segment.generic,
    }


def _flip(after: Segment, causes: Sequence[FlipCause]) -> dict[str, Any]:
    return {
        "at": after.start.isoformat(),
        "fingerprint": after.fingerprint,
        "causes": [
            {
                "kind": cause.kind,
                "text": cause.text,
                "at": cause.at.isoformat(),
                "path": cause.path,
                "line": cause.line,
            }
            for cause in causes
        ],
    }


def _delta(delta: PgssDelta) -> dict[str, Any]:
    return {
        "source": delta.source,
        "start": delta.start.isoformat(),
        "end": delta.end.isoformat(),
        "queryid": delta.queryid,
        "calls": delta.calls,
        "total_ms": delta.total_ms,
        "rows": delta.rows,
        "note": delta.note,
    }


def event_document(found: WindowEvent) -> dict[str, Any]:
    """A server event of the log (log_events) and the window it fell in, as JSON shows it."""
    where, event = found
    return {
        "where": where,
        "at": event.logged_at.isoformat() if event.logged_at else None,
        "kind": event.kind,
        "subject": event.subject,
        "value": event.value,
        "message": event.message,
        "path": event.path or None,
        "line": event.line,
    }
