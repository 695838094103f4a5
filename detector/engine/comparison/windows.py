"""Time windows of ingested logs as compare sides: `before..14:05` against `14:05..after`.

A window is its own kind of side (`WindowSide`), resolved from its spec once
(`[SOURCE@]SINCE..UNTIL`, either end may be empty); it has no row in `targets`. Its plans are
the log observations of [since, until) (of one log source, or all). What it knows of the
server comes from the log: its version from the last server start logged before its end, the
settings its plans logged (auto_explain.log_settings; the value
most of its plans had) stand as its GUCs, so the comparison's "settings that differ" names
them, and the server events in and between two windows come with the comparison.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from detector.engine.comparison.query_pairs import SidePair, pair_sides
from detector.engine.timeline.build import clock, parse_time
from detector.engine.timeline.causes import settings_pairs
from detector.errors import PlanshiftError
from detector.model.comparison import WindowEvent
from detector.model.log_rows import LogObservationRow
from detector.model.records import to_utc_naive
from detector.model.units import version_num
from detector.store import Store, TargetRecord
from detector.store.grouped import Window

WINDOW_TARGET_ID = 0  # a window has no target row (target ids start at 1)
_ROLES = (-1, -2)  # baseline, candidate: the side ids the windows' executions are grouped under


@dataclass(frozen=True)
class WindowSide(TargetRecord):
    """A time window of logged plans as a compare side (a run's side is a TargetRecord)."""

    since: datetime | None = None
    until: datetime | None = None
    log_source: str | None = None  # the log target's name; None: every log

    @property
    def spec(self) -> str:
        return self.name


def is_window(spec: str) -> bool:
    """`[SOURCE@]SINCE..UNTIL` (either end may be empty) names a time window of logged plans."""
    return ".." in spec


def window_side(store: Store, spec: str) -> WindowSide:
    """The window a spec names: `13:00..14:05`, `prod@2026-11-22T14:05..` (times UTC; a time of
    day is on the day of the latest log)."""
    source, _, window = spec.rpartition("@") if "@" in spec.split("..")[0] else ("", "", spec)
    since_text, _, until_text = window.partition("..")
    reference = store.latest_log_time()
    if reference is None:
        raise PlanshiftError(
            f"{spec!r} is a time window, but the store has no logged plans",
            "ingest auto_explain logs with `planshift ingest` first",
        )
    since = parse_time(since_text, reference) if since_text.strip() else None
    until = parse_time(until_text, reference) if until_text.strip() else None
    if since is not None and until is not None and since >= until:
        raise PlanshiftError(f"empty time window {spec!r}", "write SINCE..UNTIL, SINCE first")
    rows = store.log_observations(since, until, None, source or None)
    if not rows:
        raise PlanshiftError(
            f"no logged plans in the time window {spec!r} ({_bounds(since, until)})",
            _span_hint(store.log_observations(), source or None),
        )
    info = {
        "window": [since.isoformat() if since else None, until.isoformat() if until else None],
        "source": source or None,
    }
    version = logged_version(store, until, _files_of(store, {source or None}))
    return WindowSide(
        WINDOW_TARGET_ID, rows[-1].row.run_id, spec, "log", version,
        logged_settings([row.settings for row in rows]), info, since, until, source or None,
    )  # fmt: skip


def _bounds(since: datetime | None, until: datetime | None) -> str:
    start = clock(since) + " UTC" if since else "the first logged plan"
    end = clock(until) + " UTC" if until else "the last logged plan"
    return f"from {start} to {end}"


def _span_hint(rows: list[LogObservationRow], source: str | None) -> str:
    """The time span of the logged plans (of one source), to write a window that has some."""
    ours = [row for row in rows if source is None or row.target_name == source]
    if not ours:
        sources = sorted({row.target_name for row in rows})
        return f"no logged plans of source {source!r}; sources: {', '.join(sources)}"
    first, last = ours[0].row.collected_at, ours[-1].row.collected_at
    where = f" of {source!r}" if source else ""
    return (
        f"the logged plans{where} span {clock(first)} .. {clock(last)} UTC "
        f"({len(ours)} plans); times of day are on the day of the latest log"
    )


def logged_version(store: Store, until: datetime | None, files: set[str] | None) -> int | None:
    """The server_version_num of the last server start the logs show before `until`
    (`starting PostgreSQL 17.2 on ...`); None when no start with a minor version was logged."""
    version = None
    for event in store.log_events(None, until):
        if event.kind != "start" or (files is not None and event.path not in files):
            continue
        major, _, minor = (event.subject or "").partition(".")
        if major.isdigit() and minor.isdigit() and int(major) >= 10:
            version = version_num(f"{major}.{minor}")
    return version


def logged_settings(settings: list[str | None]) -> dict[str, str]:
    """Per setting, the value most of the plans logged (a plan that does not list a setting
    had it at its default): the settings that differ from their defaults in most plans."""
    if not settings:
        return {}
    counts: Counter[tuple[str, str]] = Counter()
    for text in settings:
        counts.update(settings_pairs(text).items())
    values: dict[str, tuple[int, str]] = {}
    for (name, value), count in counts.items():
        if count * 2 > len(settings) and count > values.get(name, (0, ""))[0]:
            values[name] = (count, value)
    return {name: value for name, (_, value) in sorted(values.items())}


def window_events(
    store: Store, baseline: TargetRecord, candidate: TargetRecord
) -> tuple[WindowEvent, ...]:
    """Server events (settings, reloads, starts, autovacuum, DDL) from the start of the earlier
    window to the end of the later one, each with the window it fell in (or `between`); ()
    unless both sides are windows."""
    if not (isinstance(baseline, WindowSide) and isinstance(candidate, WindowSide)):
        return ()
    starts = [baseline.since, candidate.since]
    ends = [baseline.until, candidate.until]
    since = None if None in starts else min(s for s in starts if s is not None)
    until = None if None in ends else max(u for u in ends if u is not None)
    files = _files_of(store, {baseline.log_source, candidate.log_source})
    found = []
    for event in store.log_events(since, until):
        if event.logged_at is None or (files is not None and event.path not in files):
            continue
        where = next(
            (role for role, side in (("baseline", baseline), ("candidate", candidate))
             if _within(event.logged_at, side)),
            "between",
        )  # fmt: skip
        found.append(WindowEvent(where, event))
    return tuple(found)


def _files_of(store: Store, sources: set[str | None]) -> set[str] | None:
    """The log files ingested under these sources; None (every file) when a window takes
    every source."""
    if None in sources:
        return None
    return {
        str(path)
        for target in store.targets()
        if target.source == "log" and target.name in sources
        for path in target.info.get("files") or ()
    }


def _within(moment: datetime, side: WindowSide) -> bool:
    return (side.since is None or moment >= side.since) and (
        side.until is None or moment < side.until
    )


def window_pairs(
    store: Store, baseline: TargetRecord, candidate: TargetRecord, query: str | None
) -> list[SidePair]:
    """pair_sides for time windows: the same pairing, the windows' logged executions as sides."""
    if not (isinstance(baseline, WindowSide) and isinstance(candidate, WindowSide)):
        raise PlanshiftError(
            f"{baseline.name!r} vs {candidate.name!r}: a time window compares with a time window",
            "give both sides as windows (SINCE..UNTIL), or both as targets of runs",
        )
    windows = [
        Window(role, _naive(side.since), _naive(side.until), side.log_source)
        for side, role in zip((baseline, candidate), _ROLES, strict=True)
    ]
    return pair_sides(store, baseline, candidate, query=query, windows=windows)


def _naive(moment: datetime | None) -> datetime | None:
    return to_utc_naive(moment) if moment is not None else None
