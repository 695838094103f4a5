"""What a log collector hands the store: ledger records, entry provenance, numpy batch columns.

Pure data (no duckdb): collectors build these and write them through `detector.model.sink.LogSink`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NamedTuple

import numpy as np

from detector.model.records import OBSERVATION_COLUMNS, ObservationRow

# what a column holds, as a sink tells the collectors (the store maps its own types to these)
ColumnKind = Literal["integer", "float", "timestamp", "other"]


@dataclass(frozen=True)
class LogFileRecord:
    file_id: int
    path: str
    format: str
    compressed: bool
    head_len: int
    head_sha256: str
    resume_offset: int
    resume_line: int
    high_offset: int
    pending_starts: tuple[int, ...]
    entries: int
    plans: int
    problems: int


@dataclass(frozen=True)
class LedgerUpdate:
    """The file's state after a batch: where to resume and the running counts."""

    path: str
    head_len: int
    head_sha256: str
    resume_offset: int
    resume_line: int
    high_offset: int
    pending_starts: tuple[int, ...]
    entries: int  # added by this batch
    plans: int
    problems: int


class LogEntryInfo(NamedTuple):
    """Where a log observation came from (one per observation of the batch, same order)."""

    line: int
    byte_offset: int
    pid: int | None
    database: str | None
    user_name: str | None
    queryid: int | None
    plan_format: str
    analyzed: bool
    settings: str | None = None  # the plan's logged Settings
    generic: bool = False  # a prepared statement's generic plan (planned for $n)


class LogEventRow(NamedTuple):
    """A server event of a log (a log_events row): where it is in the file, when, and what:
    `subject` is the setting name, the table (autovacuum, DDL; None: every table) or the
    version; `value` a setting's new value. `path` is set when read back from the store."""

    line: int
    byte_offset: int
    logged_at: datetime | None
    pid: int | None
    database: str | None
    kind: str
    subject: str | None
    value: str | None
    message: str
    path: str = ""


@dataclass(frozen=True)
class LogBatchColumns:
    """A batch of log observations as numpy columns, ready to insert (built where the rows
    were parsed: in a worker process, the ingest process only inserts them)."""

    observations: dict[str, Any]  # OBSERVATION_COLUMNS without observation_id
    entries: dict[str, Any]  # LogEntryInfo fields
    size: int

    def unlabel(self, queryids: set[int]) -> None:
        """No queryid label on the entries whose queryid is one of these."""
        if queryids and self.size:
            labels = self.entries["queryid"].tolist()
            column = np.empty(self.size, dtype=object)
            column[:] = [None if label in queryids else label for label in labels]
            self.entries["queryid"] = column


def log_batch_columns(
    rows: Sequence[Sequence[Any]], entries: Sequence[LogEntryInfo], kinds: Mapping[str, ColumnKind]
) -> LogBatchColumns:
    """`rows` (observations without observation_id) and their entries as numpy columns;
    `kinds` maps column names to what they hold (`Store.log_column_kinds`)."""
    if len(rows) != len(entries):
        raise ValueError("one LogEntryInfo per observation row")
    if not rows:
        return LogBatchColumns({}, {}, 0)
    names = OBSERVATION_COLUMNS[1:]
    observations = zip(names, zip(*rows, strict=True), strict=True)
    infos = zip(LogEntryInfo._fields, zip(*entries, strict=True), strict=True)
    return LogBatchColumns(
        {name: _numpy_column(values, kinds[name]) for name, values in observations},
        {name: _numpy_column(values, kinds[name]) for name, values in infos},
        len(rows),
    )


@dataclass(frozen=True)
class LogObservationRow:
    row: ObservationRow
    target_name: str
    pid: int | None
    database: str | None
    queryid: int | None
    settings: str | None = None
    line: int | None = None
    path: str | None = None
    generic: bool | None = None  # the plan-cache mode of the execution; None: not recorded


def _numpy_column(values: Sequence[Any], kind: ColumnKind) -> Any:
    has_null = None in values
    if kind == "integer" and not has_null:
        return np.array(values, dtype=np.int64)
    if kind == "float" and not has_null:
        return np.array(values, dtype=np.float64)
    if kind == "timestamp" and not has_null:
        return np.array(values, dtype="datetime64[us]")
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column
