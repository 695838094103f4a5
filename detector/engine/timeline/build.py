"""The postmortem view: per query, its plan fingerprints over time, flips, and pgss deltas.

From ingested auto_explain observations (`source = log`): consecutive executions with the same
plan form a segment (first/last time, count, median and p90 duration, median cost); a change of
plan between two segments is a flip, shown with the before/after medians. A query whose plan
alternates with its parameters (many short segments) is shown as time buckets with each
bucket's dominant plan instead. pg_stat_statements deltas (calls, mean time per interval)
are matched by queryid, or by the normalized text's fingerprint, and shown around each flip.

Prepared statements: after five custom plans PostgreSQL's plan cache may switch a statement to
its generic plan (planned for `$1`, not for the values). Which one an execution used is read per
log entry (a generic plan and custom plans may share a shape). A change between a custom and a
generic plan is a plan-cache switch, labelled as such and never a flip; a flip is a change from
the previous plan of the same kind (custom -> other custom, generic -> other generic), so the
custom plans flip even when the generic plan had their new shape all along.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from itertools import pairwise

from detector.engine.quantiles import timing_stats
from detector.engine.query_lookup import find_query_keys
from detector.engine.timeline.causes import (
    FlipCause,
    flip_causes,
    plan_names,
    version_changes,
)
from detector.errors import PlanshiftError
from detector.model.log_rows import LogObservationRow
from detector.model.units import fmt_ms
from detector.store import PgssSnapshotRow, Store

MAX_SEGMENTS = 12
BUCKETS = 12


@dataclass(frozen=True)
class Segment:
    fingerprint: str
    signature: str
    start: datetime
    end: datetime
    count: int
    median_ms: float | None
    p90_ms: float | None
    median_cost: float
    share: float = 1.0  # bucket mode: the dominant plan's share of the bucket
    generic: bool = False  # the plan is a prepared statement's generic plan


@dataclass(frozen=True)
class PlanCacheSwitch:
    before: Segment
    after: Segment
    executions: int | None  # custom plans of the session before its first generic plan
    new_session: bool = False

    @property
    def label(self) -> str:
        if self.after.generic:
            after = f" after {self.executions} executions" if self.executions else ""
            return f"plan cache: custom -> generic plan{after}"
        return "plan cache: generic -> custom plan" + (" (new session)" * self.new_session)


@dataclass(frozen=True)
class PgssDelta:
    source: str
    start: datetime
    end: datetime
    queryid: int
    query: str | None
    calls: int
    total_ms: float
    rows: int | None
    note: str | None  # None | "new" | "reset" | "dealloc"

    @property
    def mean_ms(self) -> float | None:
        return self.total_ms / self.calls if self.calls else None


@dataclass
class QueryTimeline:
    query_key: str
    name: str
    queryids: set[int]
    segments: list[Segment]
    bucketed: bool
    observations: int
    pgss: list[PgssDelta] = field(default_factory=list)
    switches: list[PlanCacheSwitch] = field(default_factory=list)
    # the log source (host) this timeline is of, when built per source; None: every source
    source: str | None = None
    causes: list[list[FlipCause]] = field(default_factory=list)  # per flip, in `flips` order

    @property
    def flips(self) -> list[tuple[Segment, Segment]]:
        """Plan changes: each segment against the previous one of the same kind (custom or
        generic), so a plan-cache switch is not one, and the custom plans flip even when the
        generic plan had their new shape all along. The other mode making the same change
        next (one index dropped: custom, then generic plans) is the same flip, counted once."""
        return [(before, after) for before, after, _ in self._changes()]

    def _changes(self) -> list[tuple[Segment, Segment, bool]]:
        """Flips, each with whether the other plan-cache mode followed it."""
        last: dict[bool, Segment] = {}
        found: list[tuple[Segment, Segment, bool]] = []
        latest: tuple[str, str, bool] | None = None  # from, to, mode of the latest change
        for segment in self.segments:
            previous = last.get(segment.generic)
            last[segment.generic] = segment
            if previous is None or previous.fingerprint == segment.fingerprint:
                continue
            change = (previous.fingerprint, segment.fingerprint, segment.generic)
            if latest is not None and latest[:2] == change[:2] and latest[2] != change[2]:
                found[-1] = (found[-1][0], found[-1][1], True)
            else:
                found.append((previous, segment, False))
            latest = change
        return found

    def transition_lines(self) -> dict[int, list[str]]:
        """Per segment index, the lines to show before it: plan-cache switch, flip."""
        lines: dict[int, list[str]] = {}
        switches = {id(s.after): s for s in self.switches}
        flips = {id(b): (a, n, followed) for n, (a, b, followed) in enumerate(self._changes())}
        both = self.both_modes
        for index, segment in enumerate(self.segments):
            if switch := switches.get(id(segment)):
                lines.setdefault(index, []).append(f"  >> {switch.label} at {clock(segment.start)}")
            if (flip := flips.get(id(segment))) is not None:
                before, number, followed = flip
                causes = self.causes[number] if number < len(self.causes) else []
                mode = ""
                if both:
                    mode = _MODES[segment.generic] + _FOLLOWED[segment.generic] * followed
                lines.setdefault(index, []).append(_flip_line(before, segment, causes, mode))
        return lines

    @property
    def both_modes(self) -> bool:
        """Whether the query ran with custom and with generic plans (a prepared statement)."""
        return len({segment.generic for segment in self.segments}) == 2


def clock(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


_MODES = {False: " of the custom plans", True: " of the generic plan"}
_FOLLOWED = {False: " (then of the generic plan)", True: " (then of the custom plans)"}


def _flip_line(
    before: Segment, after: Segment, causes: Sequence[FlipCause] = (), mode: str = ""
) -> str:
    """`>> FLIP at ...`; `of the custom plans` / `of the generic plan` when the query ran in
    both plan-cache modes (each mode flips on its own)."""
    ratio = ""
    if before.median_ms and after.median_ms:
        factor = after.median_ms / before.median_ms
        ratio = f" ({factor:.1f}x slower)" if factor >= 1 else f" ({1 / factor:.1f}x faster)"
    return (
        f"  >> FLIP{mode} at {clock(after.start)}: median {fmt_ms(before.median_ms)} -> "
        f"{fmt_ms(after.median_ms)} ms{ratio}, cost {before.median_cost:.1f} -> "
        f"{after.median_cost:.1f}"
        + ("; after: " + "; ".join(cause.label() for cause in causes) if causes else "")
    )


def plan_cache_switches(
    segments: Sequence[Segment], rows: Sequence[LogObservationRow], generic: dict[str, bool]
) -> list[PlanCacheSwitch]:
    """Consecutive segments of which one is a generic plan and the other a custom plan. The
    executions before a switch: the custom plans of its session (pid) since its last generic."""
    custom_since: dict[int | None, int] = {}
    executions_at: dict[datetime, int] = {}
    pids_at: dict[datetime, int | None] = {}
    for row in rows:
        pids_at.setdefault(row.row.collected_at, row.pid)
        if not is_generic(row, generic):
            custom_since[row.pid] = custom_since.get(row.pid, 0) + 1
        elif count := custom_since.pop(row.pid, 0):
            executions_at.setdefault(row.row.collected_at, count)
    found = []
    for before, after in pairwise(segments):
        if before.generic == after.generic:
            continue
        executions = executions_at.get(after.start) if after.generic else None
        new_session = pids_at.get(before.end) != pids_at.get(after.start)
        found.append(PlanCacheSwitch(before, after, executions, new_session))
    return found


def is_generic(row: LogObservationRow, generic: dict[str, bool]) -> bool:
    """Whether the execution used its prepared statement's generic plan: as logged per entry
    (a generic and a custom plan can share a shape), else as the fingerprint's plan was."""
    return row.generic if row.generic is not None else generic.get(row.row.fingerprint, False)


def parse_window(
    since: str | None, until: str | None, reference: datetime | None
) -> tuple[datetime | None, datetime | None]:
    """`--since` and `--until` as times (`parse_time`); None where not given."""
    return (
        parse_time(since, reference) if since else None,
        parse_time(until, reference) if until else None,
    )


def parse_time(text: str, reference: datetime | None = None) -> datetime:
    """ISO date-time (`2026-11-22 14:05`, `...T14:05:00+02:00`) or a time of day (`14:05`, on
    the reference's date, UTC). Naive times are UTC."""
    value = text.strip().replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        try:
            clock = time.fromisoformat(value)
        except ValueError:
            raise PlanshiftError(
                f"cannot read the time {text!r}", "use 2026-11-22T14:05:00 or 14:05 (UTC)"
            ) from None
        day = (reference or datetime.now(UTC)).date()
        moment = datetime.combine(day, clock)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _segment(
    rows: Sequence[LogObservationRow], signatures: dict[str, str], generic: bool
) -> Segment:
    durations = [r.row.duration_ms for r in rows if r.row.duration_ms is not None]
    timing = timing_stats(durations) if durations else None  # the p90 `compare` shows
    counts = Counter(r.row.fingerprint for r in rows)
    fingerprint, dominant = counts.most_common(1)[0]
    return Segment(
        fingerprint=fingerprint,
        signature=signatures[fingerprint],
        start=rows[0].row.collected_at,
        end=rows[-1].row.collected_at,
        count=len(rows),
        median_ms=timing.median_ms if timing else None,
        p90_ms=timing.p90_ms if timing else None,
        median_cost=statistics.median(r.row.total_cost for r in rows),
        share=dominant / len(rows),
        generic=generic,
    )


def segments_of(
    rows: Sequence[LogObservationRow],
    signatures: dict[str, str],
    generic: dict[str, bool] | None = None,
) -> tuple[list[Segment], bool]:
    """Runs of the same plan in the same plan-cache mode (custom or generic). When there are
    too many: time buckets, with the dominant plan of each mode in each bucket, so the custom
    plans' flip shows whatever the generic plan does."""
    kinds = generic or {}
    runs: list[tuple[tuple[str, bool], list[LogObservationRow]]] = []
    for row in rows:
        key = (row.row.fingerprint, is_generic(row, kinds))
        if runs and runs[-1][0] == key:
            runs[-1][1].append(row)
        else:
            runs.append((key, [row]))
    if len(runs) <= MAX_SEGMENTS:
        return [_segment(run, signatures, mode) for (_, mode), run in runs], False
    first, last = rows[0].row.collected_at, rows[-1].row.collected_at
    width = max((last - first) / BUCKETS, timedelta(microseconds=1))
    buckets: list[tuple[list[LogObservationRow], list[LogObservationRow]]] = [
        ([], []) for _ in range(BUCKETS)
    ]
    for row in rows:
        index = min(BUCKETS - 1, int((row.row.collected_at - first) / width))
        buckets[index][is_generic(row, kinds)].append(row)
    return [
        _segment(bucket[mode], signatures, bool(mode))
        for bucket in buckets
        for mode in (0, 1)
        if bucket[mode]
    ], True


def build_timeline(
    store: Store,
    *,
    query: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    source: str | None = None,
    per_source: bool = False,
) -> list[QueryTimeline]:
    """Timelines of the queries seen in logs (those with a flip first, then by volume);
    `per_source`: one timeline per query and log source (host), from one read."""
    queries = store.queries()
    keys = find_query_keys(queries, query) if query is not None else None
    only = next(iter(keys)) if keys is not None and len(keys) == 1 else None
    rows = store.log_observations(since, until, only, source)
    grouped: dict[tuple[str | None, str], list[LogObservationRow]] = {}
    for row in rows:
        if keys is None or row.row.query_key in keys:
            side = row.target_name if per_source else None
            grouped.setdefault((side, row.row.query_key), []).append(row)
    rows = [row for group in grouped.values() for row in group]
    signatures: dict[str, str] = {}
    generic: dict[str, bool] = {}
    names: dict[str, set[str]] = {}
    for fingerprint in {row.row.fingerprint for row in rows}:
        signatures[fingerprint] = store.plan_record(fingerprint).signature
        plan = store.plan(fingerprint)
        generic[fingerprint], names[fingerprint] = plan.generic, plan_names(plan)
    events = store.log_events(None, until)
    new_versions = version_changes(events)
    timelines = []
    for (log_source, query_key), query_rows in grouped.items():
        segments, bucketed = segments_of(query_rows, signatures, generic)
        record = queries.get(query_key)
        timeline = QueryTimeline(
            query_key=query_key,
            name=record.name if record else query_key,
            queryids={r.queryid for r in query_rows if r.queryid is not None},
            segments=segments,
            bucketed=bucketed,
            observations=len(query_rows),
            switches=[] if bucketed else plan_cache_switches(segments, query_rows, generic),
            source=log_source,
        )
        timeline.causes = [
            flip_causes(
                events,
                new_versions,
                query_rows,
                before.start,
                after.start,
                names[before.fingerprint] | names[after.fingerprint],
            )
            for before, after in timeline.flips
        ]
        timelines.append(timeline)
    timelines.sort(key=lambda t: (-len(t.flips), -t.observations, t.name))
    return timelines


def pgss_deltas(
    snapshots: Sequence[PgssSnapshotRow],
    info: dict[int, tuple[int | None, datetime | None]],
    names: dict[int, str],
) -> list[PgssDelta]:
    """Per server name, per statement: counters between consecutive snapshots.

    A reset of all statistics (pg_stat_statements_info.stats_reset moved), or a statement
    whose calls went down (evicted and re-added, or reset alone), counts from zero: the
    delta is the new value, marked. A statement absent from the previous snapshot is new
    (or came back after an eviction when dealloc grew).
    """
    by_source: dict[str, dict[int, list[PgssSnapshotRow]]] = {}
    for row in snapshots:
        by_source.setdefault(names[row.target_id], {}).setdefault(row.snapshot_id, []).append(row)
    deltas: list[PgssDelta] = []
    for source, by_snapshot in by_source.items():
        ordered = sorted(by_snapshot.items(), key=lambda item: (item[1][0].taken_at, item[0]))
        for (old_id, old_rows), (new_id, new_rows) in pairwise(ordered):
            old_dealloc, old_reset = info.get(old_id, (None, None))
            new_dealloc, new_reset = info.get(new_id, (None, None))
            reset_all = new_reset is not None and (old_reset is None or new_reset > old_reset)
            evicted = (
                new_dealloc is not None and old_dealloc is not None and new_dealloc > old_dealloc
            )
            before = {_identity(r): r.entry for r in old_rows}
            start, end = old_rows[0].taken_at, new_rows[0].taken_at
            for row in new_rows:
                entry, previous = row.entry, before.get(_identity(row))
                note: str | None = None
                if reset_all:
                    previous, note = None, "reset"
                elif previous is None:
                    note = "dealloc" if evicted else "new"
                elif entry.calls < previous.calls:
                    previous, note = None, "dealloc" if evicted else "reset"
                calls = entry.calls - (previous.calls if previous else 0)
                if calls <= 0:
                    continue
                total = entry.total_exec_time - (previous.total_exec_time if previous else 0.0)
                rows_delta = None
                if entry.rows is not None:
                    rows_delta = entry.rows - ((previous.rows or 0) if previous else 0)
                deltas.append(
                    PgssDelta(
                        source,
                        start,
                        end,
                        entry.queryid,
                        entry.query,
                        calls,
                        total,
                        rows_delta,
                        note,
                    )
                )
    deltas.sort(key=lambda d: (d.source, d.start, d.queryid))
    return deltas


def _identity(row: PgssSnapshotRow) -> tuple[int, int | None, int | None, bool | None]:
    entry = row.entry
    return (entry.queryid, entry.userid, entry.dbid, entry.toplevel)


def store_pgss_deltas(store: Store, source: str | None = None) -> list[PgssDelta]:
    targets = [t for t in store.targets() if source is None or t.name == source]
    names = {t.target_id: t.name for t in targets}
    snapshots = store.pgss_snapshots(sorted(names))
    return pgss_deltas(snapshots, store.pgss_info(), names)
