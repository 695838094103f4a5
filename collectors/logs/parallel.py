"""Ingest of a large log on every core: chunks cut at entry boundaries, parsed by workers.

The ingest process reads the file in 8 MiB chunks, each cut after the last entry boundary it
holds (a line that does not continue the previous entry), and counts their lines; worker
processes (started by a fork server that preloads only this module's imports, not the CLI or
DuckDB connection of the ingest process) turn each chunk into store rows as numpy columns
(segmenting, prefixes, JSON); the ingest process inserts the batches in file order, one
transaction each, as a sequential read would.

A worker reads its chunk as if nothing were open at its start. That holds as long as every
earlier chunk ended with no plan left open, which is the case unless backends interleaved a
JSON plan with other lines at the cut (stderr logs without logging_collector). A chunk that
ends with a plan open stops the parallel read: from that chunk on, the file is read by the
sequential reader, which carries such plans across. The last, unfinished piece of the file
(an entry being written, a line without its newline) is read sequentially too.
"""

from __future__ import annotations

import gc
import io
import multiprocessing
import os
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

from collectors.logs.batches import BatchParser, ParsedBatch
from collectors.logs.formats import BOM, MAX_ENTRY, Batch, Position, stream_error
from collectors.logs.groups import grouped
from collectors.logs.prefix import TimeParser
from collectors.logs.records import make_reader
from detector.errors import PlanshiftError

CHUNK_BYTES = 8 << 20
TAIL_SEARCH = 1 << 16  # where the last boundary of a chunk is looked for first
IN_FLIGHT_PER_WORKER = 2  # chunks queued per worker: memory stays flat
PARENT_CHECK_SECONDS = 0.5

Sequential = Callable[[BinaryIO, Position], Iterator[Batch]]


@dataclass(frozen=True)
class ChunkSpec:
    """What a worker needs besides the chunk: how to read it and whose rows they are."""

    log_format: str
    log_line_prefix: str | None
    log_timezone: str | None
    run_id: int
    target_id: int
    high_offset: int  # of an earlier ingest of this file: entries before it are stored
    pending_starts: frozenset[int]
    column_types: dict[str, str]  # Store.log_column_types: rows leave the worker as columns
    anonymize: bool = False


@dataclass(frozen=True)
class ChunkResult:
    batch: Batch
    parsed: ParsedBatch
    open_at_end: bool  # a plan continues past the chunk: its successors must be reread


_PARSER: BatchParser | None = None


def start_worker(parent: int) -> None:
    """Worker set-up: the ingest process's GC settings, and exit if that process dies (a
    killed ingest must not leave workers behind)."""
    gc.set_threshold(50_000, 20, 50)  # as the ingest process: many short-lived dicts

    def watch() -> None:
        while True:
            time.sleep(PARENT_CHECK_SECONDS)
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                os._exit(1)

    threading.Thread(target=watch, name="planshift-parent-watch", daemon=True).start()


def parse_chunk(spec: ChunkSpec, offset: int, line: int, chunk: bytes) -> ChunkResult:
    """Runs in a worker: the chunk's entries as store rows."""
    global _PARSER
    whose = (spec.run_id, spec.target_id, spec.anonymize)
    if _PARSER is None or (_PARSER.run_id, _PARSER.target_id, _PARSER.anonymize) != whose:
        _PARSER = BatchParser(spec.run_id, spec.target_id, spec.anonymize)
    position = Position(offset, line, spec.high_offset, spec.pending_starts)
    times = TimeParser(spec.log_timezone)
    reader = make_reader(
        spec.log_format, io.BytesIO(b""), position, times, spec.log_line_prefix, len(chunk)
    )
    batch = reader.take_chunk(chunk)
    parsed = _PARSER.parse(batch.entries)
    parsed.to_columns(spec.column_types)
    batch.entries = []
    return ChunkResult(batch, parsed, bool(reader.open_entries()))


@contextmanager
def _main_unseen() -> Iterator[None]:
    """Workers that do not run the main script's imports (multiprocessing would, to find
    functions defined there: the CLI and DuckDB, ~0.2 s of CPU and memory per worker)."""
    main = sys.modules.get("__main__")
    saved = {
        name: main.__dict__[name]
        for name in ("__file__", "__spec__")
        if main and name in main.__dict__
    }
    try:
        for name in saved:
            setattr(main, name, None) if name == "__spec__" else delattr(main, name)
        yield
    finally:
        for name, value in saved.items():
            setattr(main, name, value)


def last_boundary(buffer: bytes, boundary: re.Pattern[bytes]) -> int | None:
    """Where the last complete entry of the buffer ends (just after a boundary newline that
    is not the buffer's last byte, so the next line's first bytes are known)."""
    window = TAIL_SEARCH
    while True:
        start = max(0, len(buffer) - window)
        found = None
        for match in boundary.finditer(buffer, start):
            if match.start() + 1 < len(buffer):  # a newline at the very end decides nothing
                found = match.start() + 1
        if found is not None or start == 0:
            return found
        window *= 4


class ParallelRead:
    """Batches of one file from `position`, in file order, parsed by `workers` processes."""

    def __init__(
        self,
        stream: BinaryIO,
        position: Position,
        spec: ChunkSpec,
        boundary: re.Pattern[bytes],
        workers: int,
        sequential: Sequential,
    ) -> None:
        self.stream = stream
        self.position = position
        self.spec = spec
        self.boundary = boundary
        self.workers = workers
        self.sequential = sequential
        self.rest = b""  # the bytes after the last chunk

    def batches(self) -> Iterator[tuple[Batch, ParsedBatch | None]]:
        """(batch, rows); rows are None for batches read sequentially (the caller parses).
        Parsed chunks come GROUP_CHUNKS to a batch (`log_groups`)."""
        return grouped(self._batches())

    def _batches(self) -> Iterator[tuple[Batch, ParsedBatch | None]]:
        context = multiprocessing.get_context("forkserver")  # not fork: this process holds DuckDB
        context.set_forkserver_preload([__name__])  # workers start with just what they need
        pool = ProcessPoolExecutor(
            self.workers, mp_context=context, initializer=start_worker, initargs=(os.getpid(),)
        )
        pending: deque[tuple[Position, Future[ChunkResult]]] = deque()
        resume: Position | None = None
        try:
            for start, chunk in self._chunks():
                if chunk is None:  # the unfinished end of the file
                    resume = start
                    break
                with _main_unseen():  # a worker starts here, on the first submits
                    job = pool.submit(parse_chunk, self.spec, start.offset, start.line, chunk)
                pending.append((start, job))
                while len(pending) > self.workers * IN_FLIGHT_PER_WORKER:
                    result, start_of = self._next(pending)
                    if result is None:
                        resume = start_of
                        break
                    yield result.batch, result.parsed
                if resume is not None:
                    break
            while pending and (resume is None or pending[0][0].offset < resume.offset):
                result, start_of = self._next(pending)
                if result is None:
                    resume = start_of
                    break
                yield result.batch, result.parsed
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        if resume is not None:
            at_end = resume.offset + len(self.rest) == self.stream.tell()
            stream = _Rest(self.rest, resume.offset, self.stream) if at_end else self.stream
            for batch in self.sequential(stream, resume):
                yield batch, None

    def _next(
        self, pending: deque[tuple[Position, Future[ChunkResult]]]
    ) -> tuple[ChunkResult | None, Position]:
        start, job = pending.popleft()
        try:
            result = job.result()
        except BrokenProcessPool as exc:
            raise PlanshiftError(
                f"a process parsing the log died ({exc})",
                "rerun: the ingest resumes where it stopped; --jobs 1 parses in one process",
            ) from exc
        if result.open_at_end:
            pending.clear()
            return None, start
        return result, start

    def _chunks(self) -> Iterator[tuple[Position, bytes | None]]:
        """(where it starts, chunk) for each chunk; lastly (where the rest starts, None)."""
        self.stream.seek(self.position.offset)
        offset, line = self.position.offset, self.position.line
        buffer = b""
        while True:
            data = self.stream.read(CHUNK_BYTES)
            if offset == 0 and data.startswith(BOM):
                data, offset = data[len(BOM) :], len(BOM)
            buffer = buffer + data if buffer else data
            cut = last_boundary(buffer, self.boundary) if data else None
            if cut is None:
                if not data or len(buffer) > MAX_ENTRY:  # the sequential reader takes over
                    self.rest = buffer if not data else b""
                    yield self._at(offset, line), None
                    return
                continue
            chunk, buffer = buffer[:cut], buffer[cut:]
            yield self._at(offset, line), chunk
            offset += len(chunk)
            line += chunk.count(b"\n")

    def _at(self, offset: int, line: int) -> Position:
        return Position(offset, line, self.position.high_offset, self.position.pending_starts)


class _Rest(io.BytesIO):
    """The file's last bytes, seekable at their offsets in the file."""

    def __init__(self, data: bytes, base: int, source: BinaryIO) -> None:
        super().__init__(data)
        self.base = base
        self.error = stream_error(source)  # the file's damage, reported at its end

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            return super().seek(offset - self.base) + self.base
        return super().seek(offset, whence) + self.base
