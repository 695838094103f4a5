"""stderr logs (log_destination = stderr, with or without logging_collector): each entry is a
header line that `log_line_prefix` starts, then the tab-indented lines of a multi-line message.

Where an entry is cut: before every line that does not start with a tab. Backends that write
at once interleave: a JSON plan is complete when its closing `}` line arrives, and
tab-indented lines that follow another backend's one-line message go to the open plan.
The prefix is the server's `log_line_prefix` when given, else guessed (`prefix.guess_header`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO

from collectors.logs.events import event_of, may_be_event
from collectors.logs.formats import (
    BOM,
    LogReader,
    Position,
    Problem,
    RawEntry,
    int_or_none,
    is_plan_head,
    sample,
    unreadable,
)
from collectors.logs.prefix import Header, PrefixParser, TimeParser, queryid_of

MAX_OPEN_SEGMENTS = 100_000  # an unfinished JSON plan waits this many entries, then is dropped
BOUNDARY = re.compile(rb"\n(?!\t)")
SECONDARY = frozenset({"DETAIL", "HINT", "STATEMENT", "CONTEXT", "QUERY", "LOCATION"})


@dataclass(frozen=True)
class StderrFormat:
    """stderr with a known `log_line_prefix` (None: guessed per line)."""

    prefix: str | None = None
    name: str = "stderr"
    family: str = "stderr"
    boundary: re.Pattern[bytes] = BOUNDARY

    def recognizes(self, first_line: bytes) -> bool:
        return True  # the format of last resort: what no other format recognizes

    def starts_entry(self, line: bytes) -> bool:
        return self.parser().parse(line.decode("utf-8", "replace")) is not None

    def parser(self) -> PrefixParser:
        return PrefixParser(self.prefix)

    def reader(
        self, stream: BinaryIO, position: Position, times: TimeParser, batch_size: int
    ) -> LogReader:
        return StderrReader(stream, position, times, self.parser(), batch_size)


class StderrReader(LogReader):
    """Header lines matched by the prefix; tab-indented continuation lines; interleaved JSON
    plans put back together per backend."""

    boundary = BOUNDARY

    def __init__(
        self,
        stream: BinaryIO,
        position: Position,
        times: TimeParser,
        prefix: PrefixParser,
        batch_size: int = 2000,
    ) -> None:
        super().__init__(stream, position, times, batch_size)
        self.prefix = prefix
        self.open: dict[int | None, tuple[RawEntry, list[bytes], int]] = {}
        self.segments = 0

    def open_entries(self) -> list[RawEntry]:
        return [entry for entry, _, _ in self.open.values()]

    def segment(self, segment: bytes, offset: int, line: int) -> None:
        self.segments += 1
        newline = segment.find(b"\n")
        first = segment[:newline] if newline >= 0 else segment
        rest = segment[newline + 1 :] if newline >= 0 else b""
        text = first.decode("utf-8", "replace")
        header = self.prefix.parse(text)
        if header is None:
            if offset <= len(BOM) and not self.open:  # the rest of an entry cut off before
                self.problems.append(unreadable(offset, line, first))
                return
            if not segment.startswith(b"\t"):
                if first.strip():
                    self.problems.append(Problem(line, "garbage", sample(first)))
                segment, line = rest, line + 1
            if segment and self.open:
                self._continue(segment)
            elif segment:
                self.problems.append(
                    Problem(line, "truncated", "continuation lines without header")
                )
            return
        self.message(header, text[header.end :], first, rest, offset, line)

    def message(
        self, header: Header, head: str, first: bytes, rest: bytes, offset: int, line: int
    ) -> None:
        """One message: its header, first line after the prefix, and continuation lines."""
        if header.level in SECONDARY:
            if self.open and rest.startswith((b"\t ", b"\t}")):  # JSON lines, not its own
                self._continue(rest)
            return
        self.messages += 1
        if not is_plan_head(head):
            if self.open and rest.startswith((b"\t ", b"\t}")):
                self._continue(rest)
            elif may_be_event(first):
                when = self._time(header)
                pid = int_or_none(header.pid)
                self.event(event_of(head, line, offset, when, pid, header.database))
            return
        pid = int_or_none(header.pid)
        if pid in self.open:
            stale, _, _ = self.open.pop(pid)
            self.problems.append(Problem(stale.line, "truncated", "plan cut short by a new entry"))
        when = self._time(header)
        queryid, odd = queryid_of(header.queryid)
        if odd is not None:
            self.problems.append(Problem(line, "bad-queryid", odd))
        entry = RawEntry(offset, line, pid, when, header.user, header.database, queryid, head, rest)
        if when is None and (header.time or header.epoch):
            entry.bad_time = header.time or header.epoch
        if not rest.startswith(b"\t{"):
            self.emit(entry)
            return
        body, extra = split_json(rest)
        if body is None:
            self.open[pid] = (entry, [rest], self.segments)
            self._expire()
            return
        entry.body = body
        self.emit(entry)
        if extra and self.open:  # another backend's plan went on after this one
            self._continue(extra)

    def _time(self, header: Header) -> datetime | None:
        if header.time:
            return self.times.parse(header.time)
        return self.times.epoch(header.epoch) if header.epoch else None

    def _continue(self, lines: bytes) -> None:
        """Lines that belong to the most recently started unfinished JSON plan."""
        pid = next(reversed(self.open))
        entry, parts, _ = self.open[pid]
        body, extra = split_json(lines)
        if body is None:
            parts.append(lines)
            return
        del self.open[pid]
        parts.append(body)
        entry.body = b"".join(parts)
        self.emit(entry)
        if extra and self.open:
            self._continue(extra)

    def _expire(self) -> None:
        for pid, (entry, _, since) in list(self.open.items()):
            if self.segments - since > MAX_OPEN_SEGMENTS:
                del self.open[pid]
                self.problems.append(Problem(entry.line, "truncated", "plan never completed"))


def split_json(lines: bytes) -> tuple[bytes | None, bytes]:
    """Cut tab-indented lines after the closing `}` of a top-level JSON object (auto_explain
    writes it alone on its line): (through the close, what follows); (None, b"") if open."""
    end = lines.find(b"\n\t}\n")
    if end >= 0:
        return lines[: end + 4], lines[end + 4 :]
    if lines.startswith(b"\t}\n"):
        return lines[:3], lines[3:]
    stripped = lines.rstrip(b"\r\n")
    if stripped.endswith(b"\n\t}") or stripped == b"\t}":
        return lines, b""
    return None, b""
