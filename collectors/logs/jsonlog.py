"""jsonlog (log_destination = jsonlog, PostgreSQL 15+): one JSON object per line.

Where an entry is cut: at every newline (the server escapes the newlines of a message). The
fields read are the record's `message`, `timestamp`, `pid`, `user`, `dbname` and `query_id`;
formats that wrap such a record in an envelope (`envelopes`) subclass the reader and say where
the record is (`record_of`). Lines that are not auto_explain plans or server events are counted,
not decoded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

from collectors.logs.csvlog import split_message
from collectors.logs.events import event_of, may_be_event
from collectors.logs.formats import (
    LINE,
    JSONError,
    LogReader,
    Position,
    Problem,
    RawEntry,
    decode_utf8,
    is_plan_head,
    loads,
    unreadable,
)
from collectors.logs.prefix import TimeParser

_PLAN = b"plan:"


class Fields(NamedTuple):
    """What planshift reads of one server message, whatever the JSON around it."""

    message: str
    stamp: object  # the timestamp as written (a string, unless the record is damaged)
    pid: int | None
    user: str | None
    database: str | None
    queryid: int | None


def text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def int_field(value: object) -> int | None:
    """An integer field, as a JSON number or (CloudNativePG) a string of digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return None


@dataclass(frozen=True)
class JsonlogFormat:
    name: str = "jsonlog"
    family: str = "jsonlog"
    boundary: re.Pattern[bytes] = LINE

    def recognizes(self, first_line: bytes) -> bool:
        return self.starts_entry(first_line)  # not a `{` alone: a JSON plan's first line

    def starts_entry(self, line: bytes) -> bool:
        record = json_object(line)
        return record is not None and ("message" in record or "error_severity" in record)

    def reader(
        self, stream: BinaryIO, position: Position, times: TimeParser, batch_size: int
    ) -> LogReader:
        return JsonlogReader(stream, position, times, batch_size)


def json_object(line: bytes) -> dict[str, Any] | None:
    """The line as a JSON object; None when it is none."""
    if not line.lstrip().startswith(b"{"):
        return None
    try:
        found = loads(line)
    except JSONError:
        return None
    return found if isinstance(found, dict) else None


class JsonlogReader(LogReader):
    boundary = LINE
    kind = "jsonlog"  # as problems name the format
    missing: str | None = "jsonlog record without message"  # None: such objects are skipped

    def record_of(self, document: Any) -> Fields | None:
        """The server message of one line's JSON; None when the line holds none."""
        if not isinstance(document, dict) or not isinstance(document.get("message"), str):
            return None
        return Fields(
            document["message"],
            document.get("timestamp"),
            pid if isinstance(pid := document.get("pid"), int) else None,
            text_or_none(document.get("user")),
            text_or_none(document.get("dbname")),
            queryid if isinstance(queryid := document.get("query_id"), int) else None,
        )

    def segment(self, segment: bytes, offset: int, line: int) -> None:
        if not segment.strip():
            return
        self.messages += 1
        if _PLAN not in segment:
            if not segment.lstrip().startswith(b"{"):
                self.problems.append(unreadable(offset, line, segment))
                return
            if not may_be_event(segment):
                return
        try:
            document = loads(
                segment if segment.isascii() else decode_utf8(segment, line, self.problems)
            )
        except JSONError as exc:
            self.problems.append(Problem(line, "bad-record", f"{self.kind}: {exc}"))
            return
        self.read_document(document, segment, offset, line)

    def read_document(self, document: Any, segment: bytes, offset: int, line: int) -> None:
        """One line's JSON, parsed (`segment`: the line as written)."""
        fields = self.record_of(document)
        if fields is None:
            if self.missing is not None:
                self.problems.append(Problem(line, "bad-record", self.missing))
            return
        head, body = split_message(fields.message)
        stamp = fields.stamp
        when = self.times.parse(stamp) if isinstance(stamp, str) else None
        if not is_plan_head(head):
            if may_be_event(segment):
                self.event(event_of(head, line, offset, when, fields.pid, fields.database))
            return
        self.emit(
            RawEntry(
                offset,
                line,
                fields.pid,
                when,
                fields.user,
                fields.database,
                fields.queryid,
                head,
                body,
                str(stamp) if when is None and stamp is not None else None,
            )
        )
