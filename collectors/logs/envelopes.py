"""Managed services that wrap each server message in a JSON envelope, one object per line.

- CloudNativePG (`cnpg`): the operator turns the server's csvlog into JSON on the pod's
  stdout: `{"level": ..., "ts": ..., "logger": "postgres", "msg": "record", "logging_pod": ...,
  "record": {"log_time", "user_name", "database_name", "process_id", "error_severity",
  "message", "query_id", ...}}` (csvlog's column names; numbers as strings). Lines of other
  loggers (the instance manager, pg_controldata) hold no server message and are skipped.
- Google Cloud SQL (`cloudsql`): Cloud Logging entries (a sink's export, or `gcloud logging
  read --format=json --order=asc` flattened to one per line): `{"logName": ".../cloudsql.
  googleapis.com%2Fpostgres.log", "timestamp": ..., "textPayload": "<a line of postgres.log>"}`.
  Each line of the log is its own entry (a continuation line keeps its leading tab), and a
  line over ~100 kB is cut into several entries; an entry may also hold a whole message. An
  entry whose `jsonPayload` is a jsonlog record is read as jsonlog.

Where an entry is cut: at every newline, as jsonlog. CloudNativePG's record is read by
`jsonlog.JsonlogReader` (this reader only says where it is in the envelope). Cloud SQL's lines
are put back together into postgres.log as it was written: a tab-indented line continues the
entry before it, a piece after a payload of SPLIT_FROM bytes or more that is no header line
continues that line; then stderr reads it (`stderr.StderrReader`, prefix guessed; a prefix
without time takes the entry's timestamp).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO

from collectors.logs.formats import LINE, Batch, LogReader, Position, RawEntry, unreadable
from collectors.logs.jsonlog import (
    Fields,
    JsonlogReader,
    int_field,
    json_object,
    text_or_none,
)
from collectors.logs.prefix import Header, PrefixParser, TimeParser
from collectors.logs.stderr import StderrReader


class CnpgReader(JsonlogReader):
    kind = "cnpg"
    missing = None  # the operator's own lines: no server message, not a problem

    def record_of(self, document: Any) -> Fields | None:
        record = document.get("record") if isinstance(document, dict) else None
        if not isinstance(record, dict) or not isinstance(record.get("message"), str):
            return None
        return Fields(
            record["message"],
            record.get("log_time"),
            int_field(record.get("process_id")),
            text_or_none(record.get("user_name")) or None,
            text_or_none(record.get("database_name")) or None,
            int_field(record.get("query_id")),
        )


class CloudSqlReader(StderrReader):
    """Cloud Logging entries whose textPayload holds postgres.log, a line each (or a whole
    message), put back together into the log they came from and read as stderr reads it."""

    boundary = LINE

    def __init__(
        self, stream: BinaryIO, position: Position, times: TimeParser, batch_size: int = 2000
    ) -> None:
        super().__init__(stream, position, times, PrefixParser(None), batch_size)
        self.records = JsonlogReader(stream, position, times, batch_size)  # jsonPayload
        self.lines: list[bytearray] = []  # the entry being put back together
        self.where = (0, 0)  # its offset and line in this file
        self.stamp: object = None  # the Cloud Logging timestamp of its first line
        self.last_piece = 0  # length of the last textPayload
        self.chunked = False

    def segment(self, segment: bytes, offset: int, line: int) -> None:
        document = json_object(segment) if segment.strip() else None
        if document is None:
            if segment.strip():
                self._flush()
                self.problems.append(unreadable(offset, line, segment))
            return
        payload = document.get("jsonPayload")
        if isinstance(payload, dict):
            self._flush()
            self.records.messages += 1
            self.records.read_document(payload, segment, offset, line)
            self._adopt()
            return
        text = document.get("textPayload")
        if isinstance(text, str):  # else another log's entry (audit, operations): skipped
            for piece in text.encode().split(b"\n"):
                self._piece(piece, offset, line, document.get("timestamp"))

    def _piece(self, piece: bytes, offset: int, line: int, stamp: object) -> None:
        """One line of postgres.log, or a piece of a line that was too long for one entry."""
        if self.lines and piece[:1] == b"\t":
            self.lines.append(bytearray(piece))
        elif self.lines and self.last_piece >= SPLIT_FROM and not self._header(piece):
            self.lines[-1].extend(piece)
        else:
            self._flush()
            self.lines, self.where, self.stamp = [bytearray(piece)], (offset, line), stamp
        self.last_piece = len(piece)

    def _header(self, piece: bytes) -> bool:
        return self.prefix.parse(piece.decode("utf-8", "replace")) is not None

    def _flush(self) -> None:
        if self.lines:
            lines, self.lines = self.lines, []
            super().segment(b"\n".join(lines) + b"\n", *self.where)

    def _adopt(self) -> None:
        """What the jsonPayload reader read, as this reader's."""
        records = self.records
        self.entries += records.entries
        self.problems += records.problems
        self.events += records.events
        self.messages += records.messages
        records.entries, records.problems, records.events, records.messages = [], [], [], 0

    def _time(self, header: Header) -> datetime | None:
        if header.time or header.epoch:
            return super()._time(header)
        stamp = _rfc3339(self.stamp)  # Cloud SQL's older prefix has no time: the entry's
        return self.times.parse(stamp) if stamp else None

    def open_entries(self) -> list[RawEntry]:
        waiting = []
        if self.lines:
            offset, line = self.where
            waiting = [RawEntry(offset, line, None, None, None, None, None, "", b"")]
        return super().open_entries() + waiting

    def take_chunk(self, chunk: bytes) -> Batch:
        self.chunked = True  # a worker's chunk ends before an entry's first line
        return super().take_chunk(chunk)

    def _batch(self, *, final: bool) -> Batch:
        if final or self.chunked:
            self._flush()
        return super()._batch(final=final)


SPLIT_FROM = 64 << 10  # a textPayload this long may have been cut (entries over ~100 kB are)
# an entry that starts a message (a header line, or a jsonlog record), where a parallel read cuts
ENTRY_START = re.compile(
    rb'\n(?=[^\n]*"(?:textPayload": ?"(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|\[\d+\]: )|jsonPayload"))'
)


def _rfc3339(stamp: object) -> str | None:
    """Cloud Logging's `2026-11-24T14:33:15.123456789Z` as the log's own timestamps read."""
    if not isinstance(stamp, str) or "T" not in stamp:
        return None
    return stamp.replace("T", " ").removesuffix("Z") + (" UTC" if stamp.endswith("Z") else "")


@dataclass(frozen=True)
class CnpgFormat:
    name: str = "cnpg"
    family: str = "jsonlog"
    boundary: re.Pattern[bytes] = LINE

    def recognizes(self, first_line: bytes) -> bool:
        return self.starts_entry(first_line)

    def starts_entry(self, line: bytes) -> bool:
        document = json_object(line)
        return document is not None and "logger" in document and "ts" in document

    def reader(
        self, stream: BinaryIO, position: Position, times: TimeParser, batch_size: int
    ) -> LogReader:
        return CnpgReader(stream, position, times, batch_size)


@dataclass(frozen=True)
class CloudSqlFormat:
    name: str = "cloudsql"
    family: str = "jsonlog"
    boundary: re.Pattern[bytes] = ENTRY_START

    def recognizes(self, first_line: bytes) -> bool:
        return self.starts_entry(first_line)

    def starts_entry(self, line: bytes) -> bool:
        document = json_object(line)
        return (
            document is not None
            and ("textPayload" in document or "jsonPayload" in document)
            and ("logName" in document or "insertId" in document)
        )

    def reader(
        self, stream: BinaryIO, position: Position, times: TimeParser, batch_size: int
    ) -> LogReader:
        return CloudSqlReader(stream, position, times, batch_size)
