"""Ranges of a log that repeat what is already stored: a log appended to itself, a copy
concatenated after another file, a rotated piece read again under another name.

The ledger (log_files) knows a file by its first 64 KiB, so a whole copy is skipped; a range
inside a new or a grown file is found by its content: an execution is the same when its time,
backend (pid), query, plan shape, duration, cost and buffer counts are, which two real
executions almost never all share. A batch's executions are looked up among the stored ones
of the same log source in the batch's time span, and among the file's own earlier ones. A run
of at least MIN_RUN consecutive such executions (counted across the batches of a file), not
all the same one (a burst of one statement executed again and again within a millisecond is
real), is a repeated range: it is not stored again, and reported as a `duplicate` problem
naming where its content was first read. A range that starts fewer than MIN_RUN executions
before a batch's end keeps those first ones: the worker processes' batches end elsewhere than
the sequential reader's, so such an edge and the problems' count of ranges may differ between
the two. Server events that repeat a stored one exactly are dropped too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePath
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from collectors.logs.formats import Problem
from detector.model.log_rows import LogBatchColumns, LogEventRow

MIN_RUN = 4
_NEVER = -(1 << 63)
_KEY_COLUMNS = ("query_key", "params", "fingerprint", "duration_ms", "total_cost",
                "shared_hit", "shared_read")  # fmt: skip

Key = tuple[Any, ...]  # collected_at (µs), pid, then _KEY_COLUMNS
Where = tuple[str, int]  # the file and line an execution was first read at


class StoredLogs(Protocol):
    """What the duplicate check reads from the store (`detector.store.Store` has it)."""

    def logged_executions(
        self, since: datetime, until: datetime, target_ids: Sequence[int]
    ) -> list[tuple[Any, ...]]: ...

    def latest_log_time(self, target_ids: Sequence[int] | None = None) -> datetime | None: ...

    def logged_events(self, since: datetime, until: datetime) -> list[tuple[Any, ...]]: ...

    def log_file_ids(self, target_ids: Sequence[int], paths: Sequence[str]) -> set[int]: ...


@dataclass
class Duplicates:
    """The duplicate check of one ingest: `target_ids`, the log targets of its source, and
    `paths`, the files they were given (a server's events are compared with its own logs')."""

    store: StoredLogs
    target_ids: Sequence[int]
    paths: Sequence[str]
    file_ids: set[int] = field(default_factory=set)  # this ingest's files
    source_files: set[int] | None = None  # the stored files of the source, once needed
    path: str = ""  # the file whose batches come now
    carried: list[Key] = field(default_factory=list)  # its repeated run open at the batch's end
    before: int | None = None  # the source's latest stored time before this ingest (µs)
    high: int = _NEVER  # the latest time this ingest stored (µs)
    edge: dict[Key, Where] = field(default_factory=dict)  # what it stored at that time

    def drop_repeated(
        self, columns: LogBatchColumns, path: str, file_id: int
    ) -> tuple[LogBatchColumns, list[Problem]]:
        """The batch (the next of the file `path`) without its repeated ranges, and a problem
        for each range (a range that goes on from the batch before is counted from there)."""
        self.file_ids.add(file_id)
        if path != self.path:
            self.path, self.carried = path, []
        if not columns.size:
            return columns, []
        times = np.asarray(columns.observations["collected_at"], dtype="datetime64[us]")
        ticks = times.astype(np.int64)
        known = self._known(times, ticks)
        if not known and not _repeats(columns, ticks):
            self.carried = []
            self._mark(columns, ticks, path, np.ones(columns.size, dtype=bool))
            return columns, []  # the common case: nothing stored in its span, nothing twice
        keys = self._keys(columns, ticks)
        lines = [int(line) for line in columns.entries["line"].tolist()]
        matches: list[Where | None] = []
        for index, key in enumerate(keys):
            matches.append(known.get(key))
            known.setdefault(key, (path, lines[index]))
        drop = np.zeros(columns.size, dtype=bool)
        problems = []
        for start, end in self._runs([m is not None for m in matches], keys):
            drop[start:end] = True
            first, last = matches[start], matches[end - 1]
            assert first is not None and last is not None
            problems.append(
                Problem(
                    lines[start],
                    "duplicate",
                    f"lines {lines[start]}-{lines[end - 1]}: {end - start} plans already stored "
                    f"from {PurePath(first[0]).name} lines {first[1]}-{last[1]} (the same "
                    "times, backends, statements, parameters, plans and timings), not stored "
                    "again",
                )
            )
        self._mark(columns, ticks, path, ~drop)
        if not problems:
            return columns, []
        return _kept(columns, ~drop), problems

    def _known(
        self, times: npt.NDArray[np.datetime64], ticks: npt.NDArray[np.int64]
    ) -> dict[Key, Where]:
        """The stored executions the batch's may repeat: those in its time span, read from the
        store only when its span reaches back to what was stored before this ingest or to
        what this ingest stored before its latest millisecond (a log's times go forward)."""
        first = int(ticks.min())
        if self.before is None:  # what the source had before this ingest stored anything
            latest = self.store.latest_log_time(self.target_ids)
            self.before = _micros(latest.replace(tzinfo=None)) if latest is not None else _NEVER
        if first <= self.before or first < self.high:
            stored = self.store.logged_executions(
                times.min().item(), times.max().item(), self.target_ids
            )
            return {(_micros(r[0]), *r[1:-2]): (str(r[-1]), int(r[-2])) for r in stored}
        return dict(self.edge) if first == self.high else {}

    def _mark(
        self, columns: LogBatchColumns, ticks: npt.NDArray[np.int64], path: str,
        kept: npt.NDArray[np.bool_],
    ) -> None:  # fmt: skip
        """Remember what this ingest stores at its latest millisecond (the next batch may
        start within it)."""
        if not kept.any():
            return
        last = int(ticks[kept].max())
        if last < self.high:
            return
        at = np.flatnonzero(kept & (ticks == last))
        lines = columns.entries["line"][at].tolist()
        edge = dict(
            zip(self._keys(columns, ticks, at), ((path, int(n)) for n in lines), strict=True)
        )
        if last > self.high:
            self.high, self.edge = last, edge
        else:
            self.edge.update(edge)

    def _runs(self, flags: list[bool], keys: list[Key]) -> list[tuple[int, int]]:
        """[start, end) of each run of repeated executions that is a repeated range: at least
        MIN_RUN long with the run it continues from the batch before, and not the same
        execution throughout (a burst of one statement within a millisecond is real). A run
        that reaches the batch's end is carried to the next batch."""
        found = []
        start: int | None = None
        carried: list[Key] = []
        for index, flag in enumerate([*flags, False]):
            if flag and start is None:
                start = index
            elif not flag and start is not None:
                run = (self.carried if start == 0 else []) + keys[start:index]
                if len(run) >= MIN_RUN and len(set(run)) >= 2:
                    found.append((start, index))
                if index == len(flags):
                    carried = run[-MIN_RUN:]
                start = None
        self.carried = carried
        return found

    def new_events(self, events: list[LogEventRow]) -> list[LogEventRow]:
        """The events that do not repeat a stored one (or one before them in the batch)."""
        timed = [event.logged_at for event in events if event.logged_at is not None]
        if not timed:
            return events
        stored = self.store.logged_events(min(timed), max(timed))
        if stored:
            ours = self._source_files()
            stored = [row for row in stored if row[-1] in ours]
        seen = {row[:-1] for row in stored}
        kept = []
        for event in events:
            key = (
                event.logged_at,
                event.pid,
                event.kind,
                event.subject,
                event.value,
                event.message,
            )
            if event.logged_at is None or key not in seen:
                kept.append(event)
                seen.add(key)
        return kept

    def _source_files(self) -> set[int]:
        if self.source_files is None:
            self.source_files = self.store.log_file_ids(self.target_ids, self.paths)
        return self.source_files | self.file_ids

    def _keys(
        self, columns: LogBatchColumns, ticks: npt.NDArray[np.int64],
        rows: npt.NDArray[np.intp] | None = None,
    ) -> list[Key]:  # fmt: skip
        """The executions' keys (of `rows` only, when given)."""
        pick = slice(None) if rows is None else rows
        values = [ticks[pick].tolist(), columns.entries["pid"][pick].tolist()]
        values += [columns.observations[name][pick].tolist() for name in _KEY_COLUMNS]
        return list(zip(*values, strict=True))


def _repeats(columns: LogBatchColumns, ticks: npt.NDArray[np.int64]) -> bool:
    """Whether two executions of the batch may be the same: equal in time, backend, duration,
    cost and buffers (a hash of those, vectorized; `_keys` compares them exactly)."""
    mixed = ticks.astype(np.uint64)
    picked = [columns.entries["pid"]]
    picked += [columns.observations[name] for name in ("duration_ms", "total_cost", "shared_hit")]
    for column in picked:
        if column.dtype == object:  # has NULLs
            column = np.array([np.nan if v is None else v for v in column.tolist()], dtype=float)
        bits = np.asarray(column, dtype=np.float64).view(np.uint64)
        mixed = mixed * np.uint64(1_000_003) ^ bits
    mixed.sort()
    return bool((mixed[1:] == mixed[:-1]).any())


def _micros(moment: Any) -> int:
    """A stored TIMESTAMP as microseconds since the epoch (as datetime64[us] counts them)."""
    return int(np.datetime64(moment, "us").astype(np.int64))


def _kept(columns: LogBatchColumns, keep: npt.NDArray[np.bool_]) -> LogBatchColumns:
    return LogBatchColumns(
        {name: column[keep] for name, column in columns.observations.items()},
        {name: column[keep] for name, column in columns.entries.items()},
        int(keep.sum()),
    )
