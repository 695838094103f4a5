"""What every log format shares: raw entries, problems, checkpoints, chunked reading, gzip.

Each log format is one module that owns where its entries are cut and how its fields are read
(`stderr`, `rds`, `csvlog`, `jsonlog`, `envelopes`), behind the `LogFormat` interface below;
`records` lists them by name, detects a file's format and makes its reader.

Readers work on 4 MiB chunks of bytes and cut them into entries with C-speed searches (the
format's `boundary`), so memory stays flat whatever the log size. Only auto_explain entries
(`duration: ... plan:`) come out as `RawEntry`; others are counted, and server events
(`events`) kept. Broken input becomes a `Problem` with its line and the reading goes on.

Every batch ends on an entry boundary and carries a `Checkpoint`: where to resume, and which
entries before that point are still incomplete (a backend's JSON plan interrupted by another
backend's lines), so a later ingest neither loses nor repeats an entry.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, Protocol

from collectors.logs.prefix import TimeParser
from detector.errors import PlanshiftError
from detector.model.log_rows import LogEventRow

try:  # orjson is optional: 3-5x faster on large plans
    import orjson

    loads: Any = orjson.loads
    JSONError: tuple[type[Exception], ...] = (orjson.JSONDecodeError, ValueError, TypeError)
except ImportError:  # pragma: no cover - depends on the installation
    loads = json.loads
    JSONError = (ValueError, TypeError)

CHUNK = 4 << 20
MAX_ENTRY = 64 << 20
GZIP_MAGIC = b"\x1f\x8b"
GZIP_STEP = 1 << 16  # read1 size: a damaged gzip loses at most this much before the damage
BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark: skipped at the start of a file
LINE = re.compile(rb"\n")  # the boundary of formats with one entry per line


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
    # | bad-time | no-query | bad-gzip | duplicate
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
    events: list[LogEventRow] = field(default_factory=list)  # setting changes, DDL ... (log_events)


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


def int_or_none(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def is_plan_head(head: str) -> bool:
    return head.startswith("duration: ") and head.rstrip().endswith("plan:")


def unreadable(offset: int, line: int, raw: bytes) -> Problem:
    """A piece that starts no entry: the end of one when the file starts with it (a log cut
    with `tail -c`, a piece of a rotated log), else garbage."""
    if offset <= len(BOM):
        return Problem(line, "truncated", f"{PARTIAL_START}; {sample(raw)}")
    return Problem(line, "garbage", sample(raw))


PARTIAL_START = "the file starts inside an entry (cut from a larger log?), read from the next"


def sample(raw: bytes) -> str:
    """A line that is no log line, as a problem shows it."""
    text = raw[:80].decode("utf-8", "replace")
    printable = "".join(c if c.isprintable() else "?" for c in text)
    return f"not a log line: {printable!r}"


class LogReader:
    """Base: chunked reading from a Position. A format's reader sets `boundary` (an entry
    starts after each match) and turns each piece between boundaries into entries, problems
    and events in `segment`."""

    boundary: ClassVar[re.Pattern[bytes]]

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
        self.events: list[LogEventRow] = []
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

    def event(self, found: LogEventRow | None) -> None:
        if found is not None and found.byte_offset >= self.start.high_offset:
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


class LogFormat(Protocol):
    """One log format: how a file in it is recognized, where its entries start, its reader."""

    @property
    def name(self) -> str:
        """As `--format` and the store's log_files.format name it."""
        ...

    @property
    def family(self) -> str:
        """stderr, csvlog or jsonlog: how its entries are cut, as the store's log_files.format
        records it (a managed service's variant is told again from the file's first line)."""
        ...

    @property
    def boundary(self) -> re.Pattern[bytes]:
        """An entry starts after each match (the parallel read cuts there too)."""
        ...

    def recognizes(self, first_line: bytes) -> bool:
        """Whether a file whose first non-empty line this is is written in this format."""
        ...

    def starts_entry(self, line: bytes) -> bool:
        """Whether a line is the first line of an entry (how `check_log` judges a file)."""
        ...

    def reader(
        self, stream: BinaryIO, position: Position, times: TimeParser, batch_size: int
    ) -> LogReader: ...


def detect_format(head: bytes) -> str:
    """The format name of a log that starts with `head` (`records.detect_format` decides;
    this entry point is kept for callers outside collectors/logs)."""
    from collectors.logs.registry import detect_format as detect  # records imports this module

    return detect(head)
