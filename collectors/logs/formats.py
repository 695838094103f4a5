"""Server log files as batches of raw entries: stderr, csvlog and jsonlog, plain or gzip.

Readers work on 4 MiB chunks of bytes and cut them into entries with C-speed searches (a
stderr entry is a header line and the tab-indented lines after it; a csvlog record starts
with a timestamp at the beginning of a line and has balanced quotes; a jsonlog record is a
line), so memory stays flat whatever the log size. Only auto_explain entries
(`duration: ... plan:`) come out as `RawEntry`; others are counted. Broken input becomes a
`Problem` with its line and the reading goes on.

Every batch ends on an entry boundary and carries a `Checkpoint`: where to resume, and which
entries before that point are still incomplete (a backend's JSON plan interrupted by another
backend's lines), so a later ingest neither loses nor repeats an entry.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from collectors.logs.events import LogEvent, event_of, may_be_event
from collectors.logs.prefix import Header, PrefixParser, TimeParser
from detector.errors import PlanshiftError

CHUNK = 4 << 20
MAX_ENTRY = 64 << 20
MAX_OPEN_SEGMENTS = 100_000  # an unfinished JSON plan waits this many entries, then is dropped
GZIP_MAGIC = b"\x1f\x8b"
GZIP_STEP = 1 << 16  # read1 size: a damaged gzip loses at most this much before the damage
BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark: skipped at the start of a file
FORMATS = ("stderr", "csvlog", "jsonlog")
_SECONDARY = frozenset({"DETAIL", "HINT", "STATEMENT", "CONTEXT", "QUERY", "LOCATION"})
_STDERR_BOUNDARY = re.compile(rb"\n(?!\t)")
_CSV_BOUNDARY = re.compile(rb"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_CSV_RECORD_START = re.compile(
    rb"\d{4}-\d\d-\d\d [\d:.]+(?: [^,]*)?,(?:\"[^\"\n]*\")?,(?:\"[^\"\n]*\")?,\d+,"
)


@dataclass(slots=True)
class RawEntry:
    """One auto_explain message: where it starts, what the prefix or record says, its text."""

    offset: int
    line: int
    pid: int | None
    time: datetime | None
    user: str | None
    database: str | None
    queryid: int | None
    head: str  # first line of the message: "duration: 1.234 ms  plan:"
    body: bytes | str  # the rest; stderr keeps its tab-indented bytes (JSON ignores the tabs)
    bad_time: str | None = None  # a timestamp that is no time (month 13): the entry is a problem


@dataclass(frozen=True)
class Problem:
    line: int
    kind: str  # truncated | bad-json | bad-plan | bad-record | garbage | too-large | encoding
    # | bad-time | no-query | bad-gzip
    message: str


@dataclass(frozen=True)
class Checkpoint:
    resume_offset: int
    resume_line: int
    high_offset: int
    pending_starts: tuple[int, ...]


@dataclass
class Batch:
    entries: list[RawEntry]
    problems: list[Problem]
    checkpoint: Checkpoint
    messages: int  # log messages read in this batch (plans and everything else)
    incomplete: list[Problem] = field(default_factory=list)  # open at end of file
    unknown_zones: frozenset[str] = frozenset()  # time zone abbreviations read as --log-timezone
    events: list[LogEvent] = field(default_factory=list)  # setting changes, DDL ... (log_events)


@dataclass(frozen=True)
class Position:
    """Where reading starts, and what an earlier ingest already stored."""

    offset: int = 0
    line: int = 1
    high_offset: int = 0
    pending_starts: frozenset[int] = frozenset()

    def stored(self, offset: int) -> bool:
        return offset < self.high_offset and offset not in self.pending_starts


class GzipLog(gzip.GzipFile):
    """A gzip log whose damage ends the reading instead of raising: a file cut short, a bad
    checksum or trailing garbage make `read` return b"" from there, and `error` says why
    (the reader reports it as a problem at the line where reading stopped). Seeking back
    before the damage reads again."""

    error: str | None = None
    error_at = 0

    def read(self, size: int | None = -1) -> bytes:
        if self.error is not None:
            return b""
        wanted = -1 if size is None or size < 0 else size
        pieces: list[bytes] = []
        got = 0
        while wanted < 0 or got < wanted:
            try:
                piece = self.read1(GZIP_STEP if wanted < 0 else min(GZIP_STEP, wanted - got))
            except EOFError:
                self._failed("gzip data ends early (file cut short?)")
                break
            except (OSError, zlib.error) as exc:
                self._failed(f"damaged gzip data ({exc})")
                break
            if not piece:
                break
            pieces.append(piece)
            got += len(piece)
        return b"".join(pieces)

    def seek(self, offset: int, whence: int = 0) -> int:
        if self.error is not None and whence == 0 and offset < self.error_at:
            self.error = None
            super().seek(0)
        try:
            return super().seek(offset, whence)
        except (EOFError, OSError, zlib.error) as exc:
            self._failed(f"damaged gzip data ({exc})")
            return self.error_at

    def _failed(self, why: str) -> None:
        self.error = why + "; reading stopped there"
        self.error_at = self.tell()


def open_log(path: Path) -> tuple[BinaryIO, bool]:
    """The file as a binary stream of its (uncompressed) bytes, and whether it was gzip."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise PlanshiftError(f"cannot read {path}: {exc.strerror}", "check the path") from exc
    if handle.read(2) == GZIP_MAGIC:
        handle.seek(0)
        return GzipLog(fileobj=handle, mode="rb"), True  # type: ignore[return-value]
    handle.seek(0)
    return handle, False


def stream_error(stream: BinaryIO) -> str | None:
    """Why a (gzip) stream stopped early; None when it did not."""
    error = getattr(stream, "error", None)
    return error if isinstance(error, str) else None


def detect_format(head: bytes) -> str:
    """stderr, csvlog or jsonlog from the first bytes of the uncompressed log."""
    text = head.removeprefix(BOM).lstrip()
    if text.startswith(b'{"timestamp"') or text.startswith(b"{"):
        return "jsonlog"
    first = text.split(b"\n", 1)[0]
    if _CSV_RECORD_START.match(first):
        return "csvlog"
    return "stderr"


def decode_utf8(data: bytes, line: int, problems: list[Problem]) -> str:
    """`data` as text; bytes that are not UTF-8 are replaced by U+FFFD and reported as a
    problem at their line (`line` is the line of data's first byte)."""
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        where = line + data.count(b"\n", 0, exc.start)
        sample = data[exc.start : exc.start + 4].hex(" ")
        problems.append(
            Problem(where, "encoding", f"bytes that are not UTF-8 ({sample}) read as U+FFFD")
        )
        return data.decode("utf-8", "replace")


def _int(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def is_plan_head(head: str) -> bool:
    return head.startswith("duration: ") and head.rstrip().endswith("plan:")


class LogReader:
    """Base: chunked reading from a Position; subclasses cut chunks into entries."""

    boundary: re.Pattern[bytes] = _STDERR_BOUNDARY

    def __init__(
        self, stream: BinaryIO, position: Position, times: TimeParser, batch_size: int = 2000
    ) -> None:
        self.stream = stream
        self.start = position
        self.times = times
        self.batch_size = batch_size
        self.entries: list[RawEntry] = []
        self.problems: list[Problem] = []
        self.messages = 0
        self.events: list[LogEvent] = []
        self.offset = position.offset  # end of the last processed segment
        self.line = position.line
        self.tail_line: int | None = None

    def batches(self) -> Iterator[Batch]:
        self.stream.seek(self.start.offset)
        buffer = b""
        while True:
            data = self.stream.read(CHUNK)
            if self.offset == 0 and data.startswith(BOM):
                data, self.offset = data[len(BOM) :], len(BOM)
            buffer = buffer + data if buffer else data
            position = self._take_segments(buffer)
            if not data:
                if buffer[position:].endswith(b"\n"):
                    self._take(buffer[position:])
                elif buffer[position:]:
                    self._tail(buffer[position:])
                yield self._batch(final=True)
                return
            buffer = buffer[position:]
            if len(buffer) > MAX_ENTRY:
                self._too_large(buffer)
                buffer = b""
            if len(self.entries) >= self.batch_size:
                yield self._batch(final=False)

    def take_chunk(self, chunk: bytes) -> Batch:
        """Every entry of a chunk that starts and ends at entry boundaries, as one batch (the
        parallel ingest hands such chunks to its workers)."""
        position = self._take_segments(chunk)
        if chunk[position:]:
            self._take(chunk[position:])
        return self._batch(final=False)

    def _take_segments(self, buffer: bytes) -> int:
        """Take each segment that ends at a boundary; where the rest of the buffer starts."""
        position = 0
        segment = self.segment
        for match in self.boundary.finditer(buffer):
            end = match.start() + 1
            piece = buffer[position:end]
            segment(piece, self.offset, self.line)  # as _take does, one call less per entry
            self.offset += end - position
            self.line += piece.count(b"\n")
            position = end
        return position

    def _take(self, segment: bytes) -> None:
        self.segment(segment, self.offset, self.line)
        self.offset += len(segment)
        self.line += segment.count(b"\n")

    def _tail(self, segment: bytes) -> None:
        """An unterminated last line: the writer may be mid-entry; leave it for next time."""
        self.tail_line = self.line

    def _too_large(self, buffer: bytes) -> None:
        self.problems.append(
            Problem(self.line, "too-large", f"entry larger than {MAX_ENTRY >> 20} MiB skipped")
        )
        self.offset += len(buffer)
        self.line += buffer.count(b"\n")

    def segment(self, segment: bytes, offset: int, line: int) -> None:
        raise NotImplementedError

    def open_entries(self) -> list[RawEntry]:
        return []

    def emit(self, entry: RawEntry) -> None:
        if not self.start.stored(entry.offset):
            self.entries.append(entry)

    def event(self, found: LogEvent | None) -> None:
        if found is not None and found.offset >= self.start.high_offset:
            self.events.append(found)

    def _batch(self, *, final: bool) -> Batch:
        pending = self.open_entries()
        older = [p for p in self.start.pending_starts if p >= self.offset]
        starts = sorted({e.offset for e in pending} | set(older))
        resume = min([(e.offset, e.line) for e in pending], default=(self.offset, self.line))
        checkpoint = Checkpoint(
            resume_offset=resume[0],
            resume_line=resume[1],
            high_offset=max(self.offset, self.start.high_offset),
            pending_starts=tuple(starts),
        )
        incomplete = (
            [Problem(e.line, "truncated", "plan incomplete at end of file") for e in pending]
            if final
            else []
        )
        if final and self.tail_line is not None:
            incomplete.append(Problem(self.tail_line, "truncated", "unterminated last entry"))
        error = stream_error(self.stream) if final else None
        if error is not None:
            self.problems.append(Problem(self.tail_line or self.line, "bad-gzip", error))
        batch = Batch(
            self.entries,
            self.problems,
            checkpoint,
            self.messages,
            incomplete,
            frozenset(self.times.unknown_zones),
            self.events,
        )
        self.entries, self.problems, self.messages, self.events = [], [], 0, []
        return batch


class StderrReader(LogReader):
    """stderr logs: header lines matched by the prefix; tab-indented continuation lines.

    Backends that interleave: a JSON plan is complete when its closing `}` line arrives;
    tab-indented lines that follow another backend's one-line message go to the open plan.
    """

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
            if not segment.startswith(b"\t"):
                if first.strip():
                    self.problems.append(Problem(line, "garbage", _sample(first)))
                segment, line = rest, line + 1
            if segment and self.open:
                self._continue(segment)
            elif segment:
                self.problems.append(
                    Problem(line, "truncated", "continuation lines without header")
                )
            return
        if header.level in _SECONDARY:
            if self.open and rest.startswith((b"\t ", b"\t}")):  # JSON lines, not its own
                self._continue(rest)
            return
        self.messages += 1
        head = text[header.end :]
        if not is_plan_head(head):
            if self.open and rest.startswith((b"\t ", b"\t}")):
                self._continue(rest)
            elif may_be_event(first):
                when = self._time(header)
                pid = _int(header.pid)
                self.event(event_of(head, line, offset, when, pid, header.database))
            return
        pid = _int(header.pid)
        if pid in self.open:
            stale, _, _ = self.open.pop(pid)
            self.problems.append(Problem(stale.line, "truncated", "plan cut short by a new entry"))
        when = self._time(header)
        entry = RawEntry(
            offset, line, pid, when, header.user, header.database, _int(header.queryid), head, rest
        )
        if when is None and (header.time or header.epoch):
            entry.bad_time = header.time or header.epoch
        if not rest.startswith(b"\t{"):
            self.emit(entry)
            return
        body, extra = _split_json(rest)
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
        body, extra = _split_json(lines)
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


def _split_json(lines: bytes) -> tuple[bytes | None, bytes]:
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


def _sample(raw: bytes) -> str:
    text = raw[:80].decode("utf-8", "replace")
    printable = "".join(c if c.isprintable() else "?" for c in text)
    return f"not a log line: {printable!r}"
