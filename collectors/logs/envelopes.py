"""Managed services that wrap each server message in a JSON envelope, one object per line.

- CloudNativePG (`cnpg`): the operator turns the server's csvlog into JSON on the pod's
  stdout: `{"level": ..., "ts": ..., "logger": "postgres", "msg": "record", "logging_pod": ...,
  "record": {"log_time", "user_name", "database_name", "process_id", "error_severity",
  "message", "query_id", ...}}` (csvlog's column names; numbers as strings). Lines of other
  loggers (the instance manager, pg_controldata) hold no server message and are skipped.
- Google Cloud SQL (`cloudsql`): Cloud Logging entries (`gcloud logging read --format=json`
  flattened to one per line, or a sink's export): `{"logName": ".../cloudsql.googleapis.com
  %2Fpostgres.log", "timestamp": ..., "textPayload": "<the stderr entry: prefix and message>"}`;
  an entry whose `jsonPayload` is a jsonlog record is read as jsonlog.

Where an entry is cut: at every newline, as jsonlog (`jsonlog.JsonlogReader` does the reading;
these readers only say where the server's record is inside the envelope).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, BinaryIO

from collectors.logs.formats import LINE, LogReader, Position
from collectors.logs.jsonlog import (
    Fields,
    JsonlogReader,
    int_field,
    json_object,
    text_or_none,
)
from collectors.logs.prefix import PrefixParser, TimeParser


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


class CloudSqlReader(JsonlogReader):
    kind = "cloudsql"
    missing = None  # entries of other logs (audit, operations): skipped
    prefix = PrefixParser(None)  # Cloud SQL's `%m [%p]: [%l-1] db=%d,user=%u ` is guessed

    def record_of(self, document: Any) -> Fields | None:
        if not isinstance(document, dict):
            return None
        payload = document.get("jsonPayload")
        if isinstance(payload, dict):
            return super().record_of(payload)
        text = document.get("textPayload")
        if not isinstance(text, str):
            return None
        first, newline, rest = text.partition("\n")
        header = self.prefix.parse(first)
        if header is None:
            return None
        lines = [line[1:] if line.startswith("\t") else line for line in rest.split("\n")]
        message = (
            first[header.end :] + newline + "\n".join(lines) if newline else first[header.end :]
        )
        return Fields(
            message,
            header.time or _rfc3339(document.get("timestamp")),
            int_field(header.pid),
            header.user or None,
            header.database or None,
            int_field(header.queryid),
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
    boundary: re.Pattern[bytes] = LINE

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
