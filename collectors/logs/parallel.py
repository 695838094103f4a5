"""Ingest of a large log on every core: chunks cut at entry boundaries, parsed by workers.

The ingest process finds where each chunk of ~8 MiB ends (after the last entry boundary in
it: a line that does not continue the previous entry); worker processes (started by a fork
server that preloads only this module's imports, not the CLI or DuckDB connection of the
ingest process) read the chunk from the file themselves (a gzip file's chunks are read and
sent by the ingest process) and turn it into store rows as numpy columns (segmenting,
prefixes, JSON), numbering lines from the chunk's start; the ingest process adds the lines of
the chunks before it and inserts the batches in file order, one transaction each, as a
sequential read would. While the workers start (their imports take a fraction of a second),
the ingest process parses the first chunks itself. What a parser learns (proven statement
templates, plan shapes) goes to the other workers with the chunks sent after it.

A worker reads its chunk as if nothing were open at its start. That holds as long as every
earlier chunk ended with no plan left open, which is the case unless backends interleaved a
JSON plan with other lines at the cut (stderr logs without logging_collector). A chunk that
ends with a plan open stops the parallel read: from that chunk on, the file is read by the
sequential reader, which carries such plans across. So does a chunk a worker could not read
(the file was replaced). The last, unfinished piece of the file (an entry being written, a
line without its newline) is read sequentially too.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import re
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from multiprocessing import forkserver
from typing import BinaryIO

from collectors.logs.batches import BatchParser, Learned, ParsedBatch
from collectors.logs.chunks import ChunkCuts
from collectors.logs.formats import Batch, Position, stream_error
from collectors.logs.groups import grouped
from collectors.logs.prefix import TimeParser
from collectors.logs.processes import main_unseen, planshift_imported, start_worker
from collectors.logs.registry import make_reader
from detector.errors import PlanshiftError
from detector.model.log_rows import ColumnKind

CHUNK_BYTES = 8 << 20
TAIL_SEARCH = 1 << 16  # where the last boundary of a chunk is looked for first
IN_FLIGHT_PER_WORKER = 2  # chunks queued per worker: memory stays flat
STARTUP_CHUNKS = 8  # at most parsed by the ingest process itself while the workers start
BEFORE_WORKERS = 2  # of them parsed before the first is sent (which waits for the fork server)
SHARED_RESULTS = 4  # what the workers learned from this many chunks goes with each new chunk

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
    column_kinds: dict[str, ColumnKind]  # the sink's log_column_kinds: rows leave as columns
    anonymize: bool = False
    path: str | None = None  # a plain file, which the workers read their chunks from
    file_key: tuple[int, int] = (0, 0)  # its st_dev and st_ino: the file, not another at the path


@dataclass(frozen=True)
class ChunkResult:
    batch: Batch
    parsed: ParsedBatch
    open_at_end: bool  # a plan continues past the chunk: its successors must be reread
    lines: int  # in the chunk; the lines of its batch and rows are counted from its start
    learned: Learned  # new templates and plan shapes, for the other workers


_PARSER: BatchParser | None = None


def parse_chunk(
    spec: ChunkSpec, offset: int, chunk: bytes | int, seed: Learned
) -> ChunkResult | None:
    """Runs in a worker: the chunk's entries as store rows, lines numbered from 0 at its start.
    `chunk`: its bytes, or their length to read from spec.path; `seed`: what other workers
    learned from chunks before this one. None: the chunk is unreadable."""
    global _PARSER
    whose = (spec.run_id, spec.target_id, spec.anonymize)
    if _PARSER is None or (_PARSER.run_id, _PARSER.target_id, _PARSER.anonymize) != whose:
        _PARSER = BatchParser(spec.run_id, spec.target_id, spec.anonymize)
    return parse_with(_PARSER, spec, offset, chunk, seed)


def parse_with(
    parser: BatchParser, spec: ChunkSpec, offset: int, chunk: bytes | int, seed: Learned
) -> ChunkResult | None:
    data = chunk if isinstance(chunk, bytes) else read_chunk(spec, offset, chunk)
    if data is None:
        return None
    parser.adopt(seed)
    position = Position(offset, 0, spec.high_offset, spec.pending_starts)
    times = TimeParser(spec.log_timezone)
    reader = make_reader(
        spec.log_format, io.BytesIO(b""), position, times, spec.log_line_prefix, len(data)
    )
    batch = reader.take_chunk(data)
    parsed = parser.parse(batch.entries)
    parsed.to_columns(spec.column_kinds)
    batch.entries = []
    open_at_end = bool(reader.open_entries())
    return ChunkResult(batch, parsed, open_at_end, reader.line, parser.take_learned())


def read_chunk(spec: ChunkSpec, offset: int, length: int) -> bytes | None:
    """The chunk's bytes from the file; None when the path names another file now or the file
    got shorter (replaced, truncated)."""
    try:
        handle = os.open(spec.path or "", os.O_RDONLY)
    except OSError:
        return None
    try:
        found = os.fstat(handle)
        if (found.st_dev, found.st_ino) != spec.file_key:
            return None
        data = os.pread(handle, length, offset)
    finally:
        os.close(handle)
    return data if len(data) == length else None


def shift_lines(result: ChunkResult, lines: int) -> None:
    """The lines of a worker's batch and rows counted from the file's start: `lines` is the
    line of the chunk's first byte."""
    batch, parsed = result.batch, result.parsed
    batch.problems = [replace(p, line=p.line + lines) for p in batch.problems]
    batch.incomplete = [replace(p, line=p.line + lines) for p in batch.incomplete]
    batch.events = [e._replace(line=e.line + lines) for e in batch.events]
    checkpoint = batch.checkpoint
    batch.checkpoint = replace(checkpoint, resume_line=checkpoint.resume_line + lines)
    parsed.problems = [replace(p, line=p.line + lines) for p in parsed.problems]
    if parsed.columns is not None and parsed.columns.size:
        parsed.columns.entries["line"] = parsed.columns.entries["line"] + lines


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
        self.workers = workers
        self.sequential = sequential
        self.line = position.line  # of the first byte of the next chunk to store
        plain = spec.path is not None  # else gzip
        self.cuts = ChunkCuts(stream, position, boundary, plain, CHUNK_BYTES, TAIL_SEARCH)
        self.learned: deque[Learned] = deque(maxlen=SHARED_RESULTS)
        self.parser = BatchParser(spec.run_id, spec.target_id, spec.anonymize)  # while starting

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
        with main_unseen(), planshift_imported():
            forkserver.ensure_running()  # the workers' imports run while this process parses
        pending: deque[tuple[int, Future[ChunkResult | None]]] = deque()
        first: Future[ChunkResult | None] | None = None  # the first chunk sent to a worker
        resume: Position | None = None
        rest_at: int | None = None
        here = sent = 0  # chunks parsed by this process, by the workers
        try:
            for offset, chunk in self.cuts:
                if chunk is None:  # the unfinished end of the file
                    rest_at = offset
                    break
                starting = here < STARTUP_CHUNKS and (first is None or not first.done())
                job: Future[ChunkResult | None] = Future()
                ends = False  # a chunk parsed here that ends the parallel read
                if starting and (here < BEFORE_WORKERS or sent >= self.workers):
                    job.set_result(parse_with(self.parser, self.spec, offset, chunk, self._seed()))
                    ends = not self._learn(job)
                    here += 1
                else:
                    try:
                        with main_unseen():  # a worker starts here, on the first submits
                            job = pool.submit(parse_chunk, self.spec, offset, chunk, self._seed())
                    except BrokenProcessPool as exc:  # a worker died before this chunk
                        raise worker_died(exc) from exc
                    first, sent = first or job, sent + 1
                pending.append((offset, job))
                if ends:
                    break  # read sequentially from this chunk on: no more chunks to the workers
                while len(pending) > self.workers * IN_FLIGHT_PER_WORKER and (
                    not starting or pending[0][1].done()
                ):
                    result, start = self._next(pending)
                    if result is None:
                        resume = start
                        break
                    yield result.batch, result.parsed
                if resume is not None:
                    break
            while pending and resume is None:
                result, start = self._next(pending)
                if result is None:
                    resume = start
                    break
                yield result.batch, result.parsed
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        if resume is None and rest_at is not None:
            resume = self._at(rest_at)
        if resume is not None:
            stream = self.stream
            rest = self.cuts.rest
            if rest is not None and resume.offset + len(rest) == stream.tell():
                stream = _Rest(rest, resume.offset, self.stream)
            for batch in self.sequential(stream, resume):
                yield batch, None

    def _next(
        self, pending: deque[tuple[int, Future[ChunkResult | None]]]
    ) -> tuple[ChunkResult | None, Position]:
        """The next chunk's result, its lines counted from the file's start; None from a
        chunk that ends with a plan open or could not be read (read sequentially from it)."""
        offset, job = pending.popleft()
        start = self._at(offset)
        try:
            result = job.result()
        except BrokenProcessPool as exc:
            raise worker_died(exc) from exc
        if result is None or result.open_at_end:
            pending.clear()
            return None, start
        shift_lines(result, self.line)
        self.line += result.lines
        if result.learned not in self.learned:  # a chunk parsed here told it already
            self.learned.append(result.learned)
        return result, start

    def _learn(self, job: Future[ChunkResult | None]) -> bool:
        """What a chunk parsed here learned, for the chunks sent next; False when it ends the
        parallel read."""
        result = job.result()
        if result is None or result.open_at_end:
            return False
        self.learned.append(result.learned)
        return True

    def _seed(self) -> Learned:
        """What the workers learned from the last chunks stored (a worker may have missed it:
        each chunk goes to whichever worker is free)."""
        seed = Learned({}, {})
        for learned in self.learned:
            seed.templates.update(learned.templates)
            seed.shapes.update(learned.shapes)
        return seed

    def _at(self, offset: int) -> Position:
        position = self.position
        return Position(offset, self.line, position.high_offset, position.pending_starts)


def worker_died(exc: BrokenProcessPool) -> PlanshiftError:
    """A worker killed (out of memory, SIGKILL) or crashed, whenever the pool notices: what was
    stored stays, and the next ingest resumes after it."""
    return PlanshiftError(
        f"a process parsing the log died ({exc})",
        "rerun: the ingest resumes where it stopped; --jobs 1 parses in one process",
    )


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
