"""Server events of a comparison of two time windows of a log, as every report lists them.

The terminal, the JSON, the Markdown and the HTML report show the same rows: when, in which
window (or between them), what (`parameter "random_page_cost" changed to "1.1"`), and the
file:line it was read from; Markdown and HTML put the plan flips of the comparison on the same
timeline, where the candidate window starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

from detector.engine.comparison.plan_mix import mix_text
from detector.engine.timeline.build import clock
from detector.model import ComparisonResult
from detector.model.comparison import WindowEvent
from detector.model.log_rows import LogEventRow
from detector.model.units import counted

WHERE = {"baseline": "baseline window", "between": "between", "candidate": "candidate window"}


@dataclass(frozen=True)
class EventRow:
    when: str
    where: str  # baseline, between, candidate
    kind: str  # an event kind (setting, reload, start ...) or `plan flip`
    text: str
    at: str  # file:line; "" for a flip


def location(event: LogEventRow) -> str:
    return f"{PurePath(event.path).name}:{event.line}" if event.path else f"line {event.line}"


def event_rows(events: Sequence[WindowEvent]) -> list[EventRow]:
    return [
        EventRow(clock(e.logged_at) if e.logged_at else "?", where, e.kind, e.message, location(e))
        for where, e in events
    ]


def timeline(result: ComparisonResult) -> list[EventRow]:
    """The events by time, and the plan flips (the queries whose plan changed) and plan mix
    changes (the same dominant plan, other shares) as a row each where the candidate window
    starts: they were seen in it, after everything logged before it; [] without events."""
    rows = event_rows(result.events)
    if not rows:
        return []
    start = next((i for i, r in enumerate(rows) if r.where == "candidate"), len(rows))
    flipped = [q.label for q in result.queries if q.plan_changed]
    mixed = [q.label for q in result.queries if not q.plan_changed and mix_text(q)]
    # inserted at one place, the later first: the flips come before the mix changes
    for kind, noun, labels in (
        ("plan mix", "plan mix change", mixed),
        ("plan flip", "plan flip", flipped),
    ):
        if labels:
            text = f"{counted(len(labels), noun)}: " + "; ".join(labels)
            rows.insert(start, EventRow("candidate window", "candidate", kind, text, ""))
    return rows


def between(result: ComparisonResult) -> list[EventRow]:
    """The events between the two windows: what a flip seen in the candidate window followed."""
    return [row for row in event_rows(result.events) if row.where == "between"]
