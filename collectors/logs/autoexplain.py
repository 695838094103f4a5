"""`planshift ingest`: auto_explain plans from server logs into the store, resumable.

A log file is known by the SHA-256 of its first bytes (up to 64 KiB), so a renamed or rotated
file is recognized; its ledger row says where the last ingest stopped. Each batch of entries
is stored with the ledger update in one transaction (`Store.add_log_batch`): killing the
ingest at any point loses at most the batch in flight, and rerunning continues from the
ledger. Re-ingesting an unchanged file stores nothing. Files over PARALLEL_FROM_BYTES are parsed
by worker processes (`log_parallel`), with the same result.
"""

from __future__ import annotations

import gc
import hashlib
import multiprocessing
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

from collectors.logs.batches import BatchParser, ParsedBatch
from collectors.logs.duplicates import Duplicates
from collectors.logs.formats import BOM, Batch, Position, Problem, open_log, stream_error
from collectors.logs.prefix import PrefixParser, TimeParser
from collectors.logs.redact import redact_message
from collectors.logs.registry import FORMATS, detect_format, format_of, make_reader
from detector.errors import PlanshiftError
from detector.model.log_rows import LedgerUpdate, LogFileRecord
from detector.model.sink import LogSink

HEAD_BYTES = 64 << 10
PARALLEL_FROM_BYTES = 32 << 20  # smaller files: starting the workers costs more than it saves
KEEP_PROBLEMS = 20  # per file, in the report (the store keeps them all)
PLAN_PROBLEMS = ("bad-plan", "bad-json")  # an auto_explain entry that could not be read
_SPACES = re.compile(r"\s+")

Progress = Callable[[int], None]  # bytes read since the last call


@dataclass(frozen=True)
class IngestOptions:
    log_line_prefix: str | None = None  # None: guess the common prefixes
    log_format: str | None = None  # None: detect it (records.FORMATS)
    log_timezone: str | None = None  # for zone abbreviations other than UTC/GMT
    anonymize: bool = False  # no literals stored: normalized SQL, no params, masked plans
    batch_size: int = 5000
    workers: int = field(default_factory=lambda: usable_cores())  # < 2: this process only


@dataclass
class FileReport:
    path: str
    log_format: str
    compressed: bool
    resumed_at_line: int | None  # None: first ingest of this file
    messages: int = 0
    plans: int = 0
    events: int = 0  # setting changes, starts, autovacuum, DDL (log_events)
    problem_count: int = 0
    problems: list[Problem] = field(default_factory=list)
    incomplete: list[Problem] = field(default_factory=list)
    unknown_zones: set[str] = field(default_factory=set)
    kinds: Counter[str] = field(default_factory=Counter)  # problems per kind
    file_id: int | None = None  # its ledger row
    firsts: dict[str, Problem] = field(default_factory=dict)  # the first problem of each kind

    def add_problems(self, problems: list[Problem]) -> None:
        self.problem_count += len(problems)
        room = KEEP_PROBLEMS - len(self.problems)
        if room > 0:
            self.problems.extend(problems[:room])
        for problem in problems:
            self.kinds[problem.kind] += 1
            self.firsts.setdefault(problem.kind, problem)

    def nothing_read(self) -> str | None:
        """What was seen, when a file read for the first time yielded nothing: none of its
        plans could be read, or no plan, no event and a problem for every message read (no
        line read as its format); None when it yielded something (or had nothing to read)."""
        plans = sum(self.kinds[kind] for kind in PLAN_PROBLEMS)
        if self.resumed_at_line is not None:  # the file yielded before: its new part is judged
            return None  # by its problems
        if not self.plans and plans:
            kind = max(PLAN_PROBLEMS, key=lambda k: (self.kinds[k], k))
            what = f"none of its {plans} auto_explain plans could be read"
        elif not (self.plans or self.events) and self.problem_count >= max(self.messages, 1):
            kind = max(self.kinds, key=lambda k: (self.kinds[k], k))
            what = f"no entry reads as {self.log_format}"
        else:
            return None
        first = self.firsts[kind]
        return f"{what} ({self.problem_count} problems; line {first.line}: {kind}: {first.message})"


def usable_cores() -> int:
    """Cores this process may run on (a container's CPU set, not the host's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def file_key(stream: BinaryIO) -> tuple[int, int]:
    """The file an open stream reads (st_dev, st_ino), whatever its path names later."""
    found = os.fstat(stream.fileno())
    return found.st_dev, found.st_ino


def check_log(path: Path, options: IngestOptions) -> None:
    """Refuse, before anything is stored, a file that is no PostgreSQL server log: another
    compression, no line of its first HEAD_BYTES in any log format, or a --log-line-prefix
    that reads none of its lines."""
    with open_log(path)[0] as probe:
        magic = _magic(path)
        for start, (kind, tool) in _OTHER_COMPRESSIONS.items():
            if magic.startswith(start):
                raise PlanshiftError(
                    f"{path} is {kind}-compressed; planshift reads plain and gzip logs",
                    f"decompress it first: {tool} -dc {path} > {path.stem}",
                )
        head = probe.read(HEAD_BYTES)
        error = stream_error(probe)
    if error is not None and not head:
        raise PlanshiftError(f"cannot decompress {path}: {error}", "check the file: gzip -t")
    lines = [line for line in head.removeprefix(BOM).splitlines() if line.strip()]
    if not lines or all(line.startswith((b"\t", b" ")) for line in lines):
        return  # empty, or the middle of one long entry: nothing to judge
    log_format = options.log_format or detect_format(head)
    prefix = options.log_line_prefix
    if log_format == "stderr" and prefix is not None:
        matched, guessed = _readable(lines, "stderr", prefix), _readable(lines, "stderr", None)
        if matched < guessed * 0.9 or not matched:  # a right prefix reads every header line
            reads = f"only {matched} of the {guessed}" if matched else "none of the"
            raise PlanshiftError(
                f"--log-line-prefix {prefix!r} matches {reads} header lines in the first "
                f"{HEAD_BYTES >> 10} KiB of {path}",
                "copy it from the server (SHOW log_line_prefix), or omit it to guess it",
            )
    tried = [options.log_format] if options.log_format else list(FORMATS)
    if not any(_readable(lines, name, prefix) for name in tried):
        raise PlanshiftError(
            f"{path} is not a PostgreSQL server log: no line of its first {HEAD_BYTES >> 10} "
            f"KiB reads as {' or '.join(tried)}",
            "pass the server's own log files (log_destination stderr, csvlog or jsonlog); "
            "for stderr logs with an unusual prefix, --log-line-prefix",
        )


_OTHER_COMPRESSIONS = {
    b"BZh": ("bzip2", "bzip2"),
    b"\xfd7zXZ\x00": ("xz", "xz"),
    b"\x28\xb5\x2f\xfd": ("zstd", "zstd"),
    b"\x04\x22\x4d\x18": ("lz4", "lz4"),
}


def _magic(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(8)


def _readable(lines: list[bytes], name: str, prefix: str | None) -> int:
    """How many of the lines start an entry (a record, a header line) of that log format."""
    starts_entry = format_of(name, prefix).starts_entry
    return sum(1 for line in lines if starts_entry(line))


def query_name(sql: str) -> str:
    text = _SPACES.sub(" ", sql).strip()
    return text if len(text) <= 60 else text[:57] + "..."


class LogIngest:
    """Ingest files into one log target of a run (the caller creates run and target)."""

    def __init__(self, store: LogSink, target_id: int, options: IngestOptions) -> None:
        if options.log_format is not None and options.log_format not in FORMATS:
            raise PlanshiftError(
                f"unknown log format {options.log_format!r}", f"use one of {', '.join(FORMATS)}"
            )
        self.store = store
        self.target_id = target_id
        self.options = options
        PrefixParser(options.log_line_prefix)  # a bad prefix fails here, before any file
        self.known_queries: set[str] = set(store.queries())
        self.ambiguous: set[int] = set()  # queryids seen with two texts, by any worker
        runs = [t.run_id for t in store.targets() if t.target_id == target_id]
        if not runs:
            raise PlanshiftError(f"no target with id {target_id} in the store")
        self.run_id = runs[0]
        name = next(t.name for t in store.targets() if t.target_id == target_id)
        same = [t for t in store.targets() if t.source == "log" and t.name == name]
        ids = [t.target_id for t in same]
        paths = sorted({str(path) for target in same for path in target.info.get("files") or ()})
        self.duplicates = Duplicates(store, ids, paths)
        self.parser = BatchParser(self.run_id, target_id, options.anonymize)
        self.column_kinds = store.log_column_kinds()

    def ingest(self, path: Path, progress: Progress | None = None) -> FileReport:
        """Read one file from where its ledger row says, storing batch by batch."""
        thresholds = gc.get_threshold()
        gc.set_threshold(50_000, 20, 50)  # batches allocate many short-lived dicts
        try:
            return self._ingest(path, progress)
        finally:
            gc.set_threshold(*thresholds)

    def _ingest(self, path: Path, progress: Progress | None) -> FileReport:
        check_log(path, self.options)
        stream, compressed = open_log(path)
        with stream:
            head = stream.read(HEAD_BYTES)
            log_format = self.options.log_format or detect_format(head)
            record = self._ledger_row(head)
            if record is None:
                file_id = self.store.add_log_file(
                    str(path),
                    log_format=format_of(log_format).family,
                    compressed=compressed,
                    head_len=len(head),
                    head_sha256=hashlib.sha256(head).hexdigest(),
                )
                position = Position()
                report = FileReport(str(path), log_format, compressed, None, file_id=file_id)
            else:
                file_id = record.file_id
                if format_of(log_format).family != record.format:  # as it was first read
                    log_format = record.format
                position = Position(
                    record.resume_offset,
                    record.resume_line,
                    record.high_offset,
                    frozenset(record.pending_starts),
                )
                report = FileReport(
                    str(path), log_format, compressed, record.resume_line, file_id=file_id
                )
            done = position.offset
            batches = self._batches(path, log_format, stream, position, compressed)
            for batch, parsed in batches:
                self._store_batch(file_id, path, head, batch, parsed, report)
                if progress is not None:
                    progress(batch.checkpoint.high_offset - done)
                done = batch.checkpoint.high_offset
        if report.plans:
            self.store.drop_ambiguous_queryids()
        return report

    def _ledger_row(self, head: bytes) -> LogFileRecord | None:
        best: LogFileRecord | None = None
        for record in self.store.log_files():
            if record.head_len > len(head) or (best and best.head_len >= record.head_len):
                continue
            if hashlib.sha256(head[: record.head_len]).hexdigest() == record.head_sha256:
                best = record
        return best

    def _batches(
        self, path: Path, log_format: str, stream: BinaryIO, position: Position, compressed: bool
    ) -> Iterator[tuple[Batch, ParsedBatch | None]]:
        """The file's batches from `position`: by worker processes (with their rows) for a
        large file on several cores, else read here (rows None: parsed when stored)."""

        def sequential(source: BinaryIO, start: Position) -> Iterator[Batch]:
            times = TimeParser(self.options.log_timezone)
            prefix, size = self.options.log_line_prefix, self.options.batch_size
            return make_reader(log_format, source, start, times, prefix, size).batches()

        workers = self.options.workers
        small = path.stat().st_size < PARALLEL_FROM_BYTES
        if workers < 2 or small or "forkserver" not in multiprocessing.get_all_start_methods():
            for batch in sequential(stream, position):
                yield batch, None
            return
        from collectors.logs.parallel import ChunkSpec, ParallelRead  # multiprocessing: costly

        spec = ChunkSpec(
            log_format,
            self.options.log_line_prefix,
            self.options.log_timezone,
            self.run_id,
            self.target_id,
            position.high_offset,
            position.pending_starts,
            self.column_kinds,
            self.options.anonymize,
            None if compressed else str(path.resolve()),
            file_key(stream) if not compressed else (0, 0),
        )
        boundary = format_of(log_format).boundary  # where the parallel read may cut
        yield from ParallelRead(stream, position, spec, boundary, workers, sequential).batches()

    def _store_batch(
        self, file_id: int, path: Path, head: bytes, batch: Batch, parsed: ParsedBatch | None,
        report: FileReport,
    ) -> None:  # fmt: skip
        if parsed is None:
            parsed = self.parser.parse(batch.entries)
        columns, repeated = self.duplicates.drop_repeated(
            parsed.to_columns(self.column_kinds), str(path), file_id
        )
        self.ambiguous.update(parsed.ambiguous)
        columns.unlabel(self.ambiguous)  # a worker that saw one text labels them still
        problems = [
            scrub_problem(p, anonymize=self.options.anonymize)
            for p in batch.problems + parsed.problems + repeated
        ]
        queries = {
            key: (query_name(sql), sql, None if queryid in self.ambiguous else queryid)
            for key, (sql, queryid) in parsed.queries.items()
            if key not in self.known_queries
        }
        self.known_queries.update(queries)
        checkpoint = batch.checkpoint
        ledger = LedgerUpdate(
            path=str(path),
            head_len=len(head),
            head_sha256=hashlib.sha256(head).hexdigest(),
            resume_offset=checkpoint.resume_offset,
            resume_line=checkpoint.resume_line,
            high_offset=checkpoint.high_offset,
            pending_starts=checkpoint.pending_starts,
            entries=batch.messages,
            plans=columns.size,
            problems=len(problems),
        )
        found = [(p.line, p.kind, p.message) for p in problems]
        events = [event[:-1] for event in self.duplicates.new_events(batch.events)]  # all but path
        self.store.add_log_batch(
            file_id, columns, list(parsed.shapes.values()), queries, found, ledger,
            parsed.ambiguous, events,
        )  # fmt: skip
        report.events += len(events)
        report.unknown_zones |= batch.unknown_zones
        report.messages += batch.messages
        report.plans += columns.size
        report.add_problems(problems)
        report.incomplete.extend(batch.incomplete)


def scrub_problem(problem: Problem, *, anonymize: bool) -> Problem:
    """The problem as it may be stored and shown: samples of unreadable lines are withheld
    when anonymizing, and never show what follows the word password."""
    message = redact_message(problem.message)
    if anonymize and problem.kind == "garbage":
        message = "not a log line (sample withheld: anonymized ingest)"
    return problem if message == problem.message else replace(problem, message=message)
