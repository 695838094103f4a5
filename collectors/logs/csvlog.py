"""csvlog (log_destination = csvlog): one CSV record per entry, PostgreSQL 13-18 columns.

Where an entry is cut: a record starts with a timestamp at the beginning of a line and ends
where its quotes balance (quotes inside fields are doubled), so a plan's newlines stay inside
its record; a record that never balances before the next real record start is reported as
`bad-record`. Records that are not auto_explain plans or server events are counted, not decoded.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from typing import BinaryIO

from collectors.logs.events import event_of, may_be_event
from collectors.logs.formats import (
    BOM,
    LogReader,
    Position,
    Problem,
    RawEntry,
    decode_utf8,
    int_or_none,
    is_plan_head,
    unreadable,
)
from collectors.logs.prefix import TimeParser

BOUNDARY = re.compile(rb"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
RECORD_START = re.compile(
    rb"\d{4}-\d\d-\d\d [\d:.]+(?: [^,]*)?,(?:\"[^\"\n]*\")?,(?:\"[^\"\n]*\")?,\d+,"
)
_PLAN = b"plan:"
# csvlog columns (PostgreSQL 13-18): the ones planshift reads
_TIME, _USER, _DB, _PID, _SEVERITY, _MESSAGE, _QUERY_ID = 0, 1, 2, 3, 11, 13, 25


def split_message(message: str) -> tuple[str, str]:
    """A message's first line (`duration: ... plan:`) and the rest (the plan)."""
    head, _, body = message.partition("\n")
    return head, body


@dataclass(frozen=True)
class CsvlogFormat:
    name: str = "csvlog"
    family: str = "csvlog"
    boundary: re.Pattern[bytes] = BOUNDARY

    def recognizes(self, first_line: bytes) -> bool:
        return self.starts_entry(first_line)

    def starts_entry(self, line: bytes) -> bool:
        return RECORD_START.match(line) is not None

    def reader(
        self, stream: BinaryIO, position: Position, times: TimeParser, batch_size: int
    ) -> LogReader:
        return CsvReader(stream, position, times, batch_size)


class CsvReader(LogReader):
    boundary = BOUNDARY

    def __init__(
        self, stream: BinaryIO, position: Position, times: TimeParser, batch_size: int = 2000
    ) -> None:
        super().__init__(stream, position, times, batch_size)
        self.parts: list[bytes] = []
        self.part_offset = 0
        self.part_line = 0
        self.quotes = 0

    def segment(self, segment: bytes, offset: int, line: int) -> None:
        if self.parts and self.quotes % 2 and RECORD_START.match(segment):
            if self.part_offset <= len(BOM):  # a record's rest, the file cut inside it
                self.problems.append(unreadable(self.part_offset, self.part_line, self.parts[0]))
            else:
                self.problems.append(Problem(self.part_line, "bad-record", "unbalanced quotes"))
            self.parts = []
        if not self.parts:
            self.part_offset, self.part_line, self.quotes = offset, line, 0
        self.parts.append(segment)
        self.quotes += segment.count(b'"')
        if self.quotes % 2 == 0:
            record = b"".join(self.parts) if len(self.parts) > 1 else segment
            self.parts = []
            self.record(record, self.part_offset, self.part_line)

    def open_entries(self) -> list[RawEntry]:
        if not self.parts:
            return []
        return [RawEntry(self.part_offset, self.part_line, None, None, None, None, None, "", "")]

    def record(self, record: bytes, offset: int, line: int) -> None:
        if not RECORD_START.match(record):
            if record.strip():
                self.problems.append(unreadable(offset, line, record))
            return
        self.messages += 1
        if _PLAN not in record and not may_be_event(record):
            return
        try:
            fields = next(csv.reader([decode_utf8(record, line, self.problems)]))
        except (csv.Error, StopIteration) as exc:
            self.problems.append(Problem(line, "bad-record", f"csv: {exc}"))
            return
        if len(fields) <= _MESSAGE:
            self.problems.append(Problem(line, "bad-record", f"{len(fields)} csv fields"))
            return
        head, body = split_message(fields[_MESSAGE])
        if not is_plan_head(head):
            if may_be_event(record):
                when = self.times.parse(fields[_TIME])
                pid, database = int_or_none(fields[_PID]), fields[_DB] or None
                self.event(event_of(head, line, offset, when, pid, database))
            return
        when = self.times.parse(fields[_TIME])
        self.emit(
            RawEntry(
                offset,
                line,
                int_or_none(fields[_PID]),
                when,
                fields[_USER] or None,
                fields[_DB] or None,
                int_or_none(fields[_QUERY_ID]) if len(fields) > _QUERY_ID else None,
                head,
                body,
                fields[_TIME] if when is None else None,
            )
        )
