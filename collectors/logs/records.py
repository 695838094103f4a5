"""csvlog and jsonlog readers: one record per entry, so no interleaving to repair.

csvlog: a record starts with a timestamp at the beginning of a line and ends where the quotes
balance (quotes inside fields are doubled); a record that never balances before the next
real record start is reported as `bad-record`. jsonlog: one JSON object per line.
Both skip records that are not auto_explain plans before decoding them.
"""

from __future__ import annotations

import csv
import json
import re
from typing import Any, BinaryIO

from collectors.logs.events import event_of, may_be_event
from collectors.logs.formats import (
    _CSV_BOUNDARY,
    _CSV_RECORD_START,
    LogReader,
    Position,
    Problem,
    RawEntry,
    StderrReader,
    _int,
    _sample,
    decode_utf8,
    is_plan_head,
)
from collectors.logs.prefix import PrefixParser, TimeParser

try:  # orjson is optional: 3-5x faster on large plans
    import orjson

    _loads: Any = orjson.loads
    JSONError: tuple[type[Exception], ...] = (orjson.JSONDecodeError, ValueError, TypeError)
except ImportError:  # pragma: no cover - depends on the installation
    _loads = json.loads
    JSONError = (ValueError, TypeError)

_PLAN = b"plan:"
_LINE = re.compile(rb"\n")
# csvlog columns (PostgreSQL 13-18): the ones planshift reads
_TIME, _USER, _DB, _PID, _SEVERITY, _MESSAGE, _QUERY_ID = 0, 1, 2, 3, 11, 13, 25


def split_message(message: str) -> tuple[str, str]:
    head, _, body = message.partition("\n")
    return head, body


class CsvReader(LogReader):
    boundary = _CSV_BOUNDARY

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parts: list[bytes] = []
        self.part_offset = 0
        self.part_line = 0
        self.quotes = 0

    def segment(self, segment: bytes, offset: int, line: int) -> None:
        if self.parts and self.quotes % 2 and _CSV_RECORD_START.match(segment):
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
        if not _CSV_RECORD_START.match(record):
            if record.strip():
                self.problems.append(Problem(line, "garbage", _sample(record)))
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
                pid, database = _int(fields[_PID]), fields[_DB] or None
                self.event(event_of(head, line, offset, when, pid, database))
            return
        when = self.times.parse(fields[_TIME])
        self.emit(
            RawEntry(
                offset,
                line,
                _int(fields[_PID]),
                when,
                fields[_USER] or None,
                fields[_DB] or None,
                _int(fields[_QUERY_ID]) if len(fields) > _QUERY_ID else None,
                head,
                body,
                fields[_TIME] if when is None else None,
            )
        )


class JsonlogReader(LogReader):
    boundary = _LINE

    def segment(self, segment: bytes, offset: int, line: int) -> None:
        if not segment.strip():
            return
        self.messages += 1
        if _PLAN not in segment:
            if not segment.lstrip().startswith(b"{"):
                self.problems.append(Problem(line, "garbage", _sample(segment)))
                return
            if not may_be_event(segment):
                return
        try:
            record = _loads(
                segment if segment.isascii() else decode_utf8(segment, line, self.problems)
            )
        except JSONError as exc:
            self.problems.append(Problem(line, "bad-record", f"jsonlog: {exc}"))
            return
        if not isinstance(record, dict) or not isinstance(record.get("message"), str):
            self.problems.append(Problem(line, "bad-record", "jsonlog record without message"))
            return
        head, body = split_message(record["message"])
        stamp = record.get("timestamp")
        when = self.times.parse(stamp) if isinstance(stamp, str) else None
        if not is_plan_head(head):
            if may_be_event(segment):
                pid = record.get("pid") if isinstance(record.get("pid"), int) else None
                self.event(event_of(head, line, offset, when, pid, _text(record.get("dbname"))))
            return
        self.emit(
            RawEntry(
                offset,
                line,
                record.get("pid") if isinstance(record.get("pid"), int) else None,
                when,
                _text(record.get("user")),
                _text(record.get("dbname")),
                record.get("query_id") if isinstance(record.get("query_id"), int) else None,
                head,
                body,
                str(stamp) if when is None and stamp is not None else None,
            )
        )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


READERS: dict[str, type[LogReader]] = {
    "stderr": StderrReader,
    "csvlog": CsvReader,
    "jsonlog": JsonlogReader,
}


def make_reader(
    log_format: str,
    stream: BinaryIO,
    position: Position,
    times: TimeParser,
    log_line_prefix: str | None,
    batch_size: int,
) -> LogReader:
    """The reader of a log format (stderr needs the server's log_line_prefix, or None)."""
    if log_format == "stderr":
        return StderrReader(stream, position, times, PrefixParser(log_line_prefix), batch_size)
    if log_format == "csvlog":
        return CsvReader(stream, position, times, batch_size)
    return JsonlogReader(stream, position, times, batch_size)
