"""syslog (log_destination = syslog): the server's stderr lines, cut into syslog records.

PostgreSQL (elog.c, write_syslog) sends each line of a message as its own syslog record and
cuts a line longer than 900 bytes (PG_SYSLOG_LIMIT) at a word boundary; with
syslog_sequence_numbers (the default) each record starts with `[seq-chunk] `, `seq` counting
the messages of that server process. The daemon adds its own header and writes control
characters as `#` and three octal digits (rsyslog's default), so the tab that starts each
continuation line reads `#011`:

    Nov 27 10:00:00 db1 postgres[4242]: [7-1] 2026-11-27 10:00:00.123 UTC [4242] LOG:  duration: 0.3 ms  plan:
    Nov 27 10:00:00 db1 postgres[4242]: [7-2] #011{
    Nov 27 10:00:00 db1 postgres[4242]: [7-3] #011  "Query Text": "SELECT ...

(`2026-11-27T10:00:00.123456+00:00 db1 postgres[4242]: ...` with rsyslog's high-precision
format.) Where an entry is cut: the records of one message are put back together per process
(the pid of the syslog tag) and sequence number; a record starting with `#011` begins a new
line of the message, one starting with a space (or following a 900-byte piece) continues the
line it was cut from. Records of other processes may come between them. A message is whole
when its process starts the next one, when a JSON plan's closing brace arrives, when nothing
was added to it for IDLE_LINES lines, or at the end of the file. The whole message is then
read as stderr reads it (the server's `log_line_prefix` inside it, given or guessed); when the
prefix has no time, the syslog header's is used (a traditional header has no year: the
current one, in --log-timezone). Records of other programs are skipped; with
syslog_sequence_numbers off, `[chunk] ` numbers the records of a split message only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import BinaryIO

from collectors.logs.formats import LINE, Batch, LogReader, Position, RawEntry
from collectors.logs.prefix import Header, PrefixParser, TimeParser
from collectors.logs.stderr import StderrFormat, StderrReader

PG_SYSLOG_LIMIT = 900
IDLE_LINES = 5000  # a message nothing was added to for this many lines is whole
_HEADER = re.compile(
    rb"(?:(?P<month>[A-Z][a-z]{2}) (?P<day>[ \d]\d) (?P<clock>\d\d:\d\d:\d\d)"
    rb"|(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?))"
    rb" \S+ (?P<ident>[^\s\[:]+)\[(?P<pid>\d+)\]: "
    rb"(?:\[(?P<seq>\d+)(?:-(?P<chunk>\d+))?\] )?"
)
_ESCAPED = re.compile(rb"#(0[0-3][0-7]|177)")  # rsyslog's control characters
_MONTHS = {m: n for n, m in enumerate(
    (b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
     b"Dec"), 1)}  # fmt: skip


def _unescaped(text: bytes) -> bytes:
    if b"#" not in text:
        return text
    return _ESCAPED.sub(lambda m: bytes((int(m[1], 8),)), text)


def _is_server_record(found: re.Match[bytes]) -> bool:
    return found["seq"] is not None or b"postgres" in found["ident"].lower()


@dataclass(frozen=True)
class SyslogFormat(StderrFormat):
    """syslog records of a server's messages; the prefix inside them as stderr reads it."""

    name: str = "syslog"
    boundary: re.Pattern[bytes] = LINE

    def recognizes(self, first_line: bytes) -> bool:
        found = _HEADER.match(first_line)
        return found is not None and _is_server_record(found)

    def starts_entry(self, line: bytes) -> bool:
        found = _HEADER.match(line)
        return (
            found is not None
            and _is_server_record(found)
            and found["chunk"] in (None, b"1")
            and self.parser().parse(_unescaped(line[found.end() :]).decode("utf-8", "replace"))
            is not None
        )

    def reader(
        self, stream: BinaryIO, position: Position, times: TimeParser, batch_size: int
    ) -> LogReader:
        return SyslogReader(stream, position, times, self.parser(), batch_size)


@dataclass
class _Message:
    """The records of one message so far: each line's (offset, line number, text)."""

    seq: bytes | None
    stamp: datetime | None
    lines: list[tuple[int, int, bytearray]] = field(default_factory=list)
    last_line: int = 0
    last_piece: int = 0  # length of the last record's text

    @property
    def is_plan(self) -> bool:
        return b"plan:" in self.lines[0][2][:4096]


class SyslogReader(StderrReader):
    boundary = LINE

    def __init__(
        self,
        stream: BinaryIO,
        position: Position,
        times: TimeParser,
        prefix: PrefixParser,
        batch_size: int = 2000,
    ) -> None:
        super().__init__(stream, position, times, prefix, batch_size)
        self.messages_open: dict[int, _Message] = {}
        self.numbered: bool | None = None  # syslog_sequence_numbers, once a record shows it
        self.stamp: datetime | None = None  # the syslog time of the message being read
        self.chunked = False  # take_chunk: a worker's chunk, read alone

    def segment(self, segment: bytes, offset: int, line: int) -> None:
        found = _HEADER.match(segment)
        if found is None or not _is_server_record(found):
            return  # another program's record, or no syslog record: not the server's
        text = _unescaped(segment[found.end() :].rstrip(b"\r\n"))
        pid, seq, chunk = int(found["pid"]), found["seq"], found["chunk"]
        if chunk is not None:
            self.numbered = True
        elif seq is not None and self.numbered is False:  # `[2] `: the piece of a message
            seq, chunk = None, seq
        elif seq is None and self.numbered is None:
            self.numbered = False
        current = self.messages_open.get(pid)
        if chunk is None or chunk == b"1":
            if current is not None:
                self._deliver(pid)
            self.messages_open[pid] = _Message(seq, self._stamp(found))
            self._add(pid, offset, line, text, new_line=True)
        elif current is not None and current.seq == seq:
            self._add(pid, offset, line, text, new_line=self._starts_line(current, text))
        # else: the rest of a message that began before this read: its start is not here
        if line % 1024 == 0:
            self._close_idle(line)

    def _starts_line(self, message: _Message, text: bytes) -> bool:
        """Whether a record begins a new line of its message (the server cut at a newline)
        rather than continuing a line cut at PG_SYSLOG_LIMIT."""
        if text[:1] == b"\t":
            return True
        if text[:1] == b" ":
            return False
        if message.last_piece < PG_SYSLOG_LIMIT - 3:  # cut short only at a newline
            return True
        return self.prefix.parse(text.decode("utf-8", "replace")) is not None

    def _add(self, pid: int, offset: int, line: int, text: bytes, new_line: bool) -> None:
        message = self.messages_open[pid]
        if new_line or not message.lines:
            message.lines.append((offset, line, bytearray(text)))
        else:
            message.lines[-1][2].extend(text)
        message.last_line, message.last_piece = line, len(text)
        if text == b"\t}" and message.is_plan:  # a JSON plan's closing brace: the message ends
            self._deliver(pid)

    def _deliver(self, pid: int) -> None:
        """Read a whole message as stderr reads it: each header line (the message's, DETAIL,
        STATEMENT ...) with the tab-indented lines after it."""
        message = self.messages_open.pop(pid)
        self.stamp = message.stamp
        pieces: list[tuple[int, int, list[bytes]]] = []
        for offset, line, text in message.lines:
            if text[:1] == b"\t" and pieces:
                pieces[-1][2].append(bytes(text))
            else:
                pieces.append((offset, line, [bytes(text)]))
        for offset, line, lines in pieces:
            first = lines[0]
            header = self.prefix.parse(first.decode("utf-8", "replace"))
            if header is None:
                super().segment(b"\n".join(lines) + b"\n", offset, line)  # reported there
                continue
            if header.pid is None:
                header = header._replace(pid=str(pid))
            rest = b"".join(piece + b"\n" for piece in lines[1:])
            head = first.decode("utf-8", "replace")[header.end :]
            self.segments += 1
            self.message(header, head, first, rest, offset, line)

    def _time(self, header: Header) -> datetime | None:
        if header.time or header.epoch:
            return super()._time(header)
        return self.stamp

    def _stamp(self, found: re.Match[bytes]) -> datetime | None:
        """The syslog header's time, as UTC (naive, as the log's own times are read)."""
        try:
            if found["iso"] is not None:
                moment = datetime.fromisoformat(found["iso"].decode())
                if moment.tzinfo is None:
                    moment = moment.replace(tzinfo=self.times.zone)
            else:
                hour, minute, second = (int(part) for part in found["clock"].split(b":"))
                moment = datetime(
                    datetime.now(UTC).year, _MONTHS[found["month"]], int(found["day"]),
                    hour, minute, second, tzinfo=self.times.zone,
                )  # fmt: skip
        except (ValueError, KeyError):
            return None
        return moment.astimezone(UTC).replace(tzinfo=None)

    def _close_idle(self, line: int) -> None:
        for pid, message in list(self.messages_open.items()):
            if line - message.last_line > IDLE_LINES:
                self._deliver(pid)

    def open_entries(self) -> list[RawEntry]:
        waiting = [
            RawEntry(m.lines[0][0], m.lines[0][1], pid, None, None, None, None, "", b"")
            for pid, m in self.messages_open.items()
            if m.is_plan
        ]
        return super().open_entries() + waiting

    def take_chunk(self, chunk: bytes) -> Batch:
        self.chunked = True
        return super().take_chunk(chunk)

    def _batch(self, *, final: bool) -> Batch:
        """At the end of the file every message is whole; at the end of a worker's chunk, every
        message but a plan (a plan left open hands the rest of the file to the sequential
        reader, which carries it on)."""
        if final or self.chunked:
            for pid, message in list(self.messages_open.items()):
                if final or not message.is_plan:
                    self._deliver(pid)
        return super()._batch(final=final)
