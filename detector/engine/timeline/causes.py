"""What can explain a flip: the nearest server event before it (from `log_events`) and a change
of the plans' logged Settings.

An event can explain a flip when it falls after the earlier segment began and at or before the
new plan's first execution, and when it is one of: a change of a setting the planner reads, a
server start with another version than the previous start, an autovacuum, autoanalyze or
DDL/maintenance statement on a table (or index) one of the two plans reads (or on every table).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePath

from detector.model import Plan
from detector.model.log_rows import LogEventRow, LogObservationRow
from detector.model.settings import is_planner_setting

_NO_TIME = datetime.min.replace(tzinfo=UTC)
_PAIR = re.compile(r"(\w+) = '((?:[^']|'')*)'")


@dataclass(frozen=True)
class FlipCause:
    kind: str  # a log_events kind, or "plan-settings"
    text: str
    at: datetime
    path: str | None = None
    line: int | None = None

    def label(self) -> str:
        where = ""
        if self.line is not None:
            where = f" (log line {self.line}" + (
                f" of {PurePath(self.path).name})" if self.path else ")"
            )
        return f"{self.text} at {self.at.strftime('%H:%M:%S')}{where}"


def plan_names(plan: Plan) -> set[str]:
    """Lower-case table and index names a plan reads (bare and schema-qualified)."""
    names: set[str] = set()
    for _, node in plan.nodes():
        for name in (node.relation, node.qualified_relation, node.index_name):
            if name:
                names.add(name.lower())
    return names


def version_changes(events: Sequence[LogEventRow]) -> set[int]:
    """Indexes of start events whose version differs from the previous start's."""
    changed: set[int] = set()
    previous: str | None = None
    for index, event in enumerate(events):
        if event.kind == "start" and event.subject:
            if previous is not None and event.subject != previous:
                changed.add(index)
            previous = event.subject
    return changed


def _explains(event: LogEventRow, names: set[str], new_version: bool) -> bool:
    if event.kind == "setting":
        return event.subject is not None and is_planner_setting(event.subject)
    if event.kind == "start":
        return new_version
    if event.kind in ("autovacuum", "autoanalyze", "ddl"):
        if event.subject is None:
            return True
        subject = event.subject.lower()
        return subject in names or subject.rsplit(".", 1)[-1] in names
    return False


def event_cause(
    events: Sequence[LogEventRow],
    new_versions: set[int],
    start: datetime,
    flip_at: datetime,
    names: set[str],
) -> FlipCause | None:
    """The latest event in (start, flip_at] that can explain a flip of plans reading `names`
    (`events` in time order, those without a time first)."""
    end = bisect_right(events, flip_at, key=lambda event: event.logged_at or _NO_TIME)
    for index in range(end - 1, -1, -1):
        event = events[index]
        if event.logged_at is None or event.logged_at <= start:
            return None
        if _explains(event, names, index in new_versions):
            return FlipCause(event.kind, event.message, event.logged_at, event.path, event.line)
    return None


def settings_cause(
    rows: Sequence[LogObservationRow], start: datetime, flip_at: datetime
) -> FlipCause | None:
    """The last change of the plans' logged Settings in (start, flip_at]."""
    found: FlipCause | None = None
    previous: LogObservationRow | None = None
    for row in rows:
        when = row.row.collected_at
        if when > flip_at:
            break
        if previous is not None and when > start and row.settings != previous.settings:
            text = "plan Settings: " + settings_diff(previous.settings, row.settings)
            found = FlipCause("plan-settings", text, when, row.path, row.line)
        previous = row
    return found


def settings_diff(old: str | None, new: str | None) -> str:
    before, after = settings_pairs(old), settings_pairs(new)
    changed = [
        f"{name} {before.get(name, 'default')} -> {after.get(name, 'default')}"
        for name in sorted(before.keys() | after.keys())
        if before.get(name) != after.get(name)
    ]
    return ", ".join(changed) or "changed"


def settings_pairs(text: str | None) -> dict[str, str]:
    """A plan's logged Settings (`name = 'value', ...`) as {name: value}."""
    return {name: value.replace("''", "'") for name, value in _PAIR.findall(text or "")}


def flip_causes(
    events: Sequence[LogEventRow],
    new_versions: set[int],
    rows: Sequence[LogObservationRow],
    window_start: datetime,
    flip_at: datetime,
    names: set[str],
) -> list[FlipCause]:
    """The nearest explaining event, then the Settings change, when found."""
    found = [
        event_cause(events, new_versions, window_start, flip_at, names),
        settings_cause(rows, window_start, flip_at),
    ]
    return [cause for cause in found if cause is not None]
