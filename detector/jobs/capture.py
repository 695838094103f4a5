"""`planshift capture`: a running system's workload as a workload file planshift can replay.

Read-only on the source (collectors/capture/workload_statements.py says how): the top statements of
pg_stat_statements by total time, without planshift's own, monitoring, catalog reads and what
--exclude names; their parameters from auto_explain logs when given
(collectors/capture/params.py); production's planner settings (collectors/capture/production_settings.py);
the schema and, with --data, the data from pg_dump (collectors/capture/dump.py). Written to
DIR (0700 when created, every file 0600: the dump holds production rows, the workload logged
parameter values): workload.toml, schema.sql, dump.sql (--data), coverage.txt.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from collectors.capture.dump import PRIVATE_DIRECTORY, dump, open_private
from collectors.capture.params import LoggedValues, read_logged_values
from collectors.capture.production_settings import ProductionSettings, read_settings
from collectors.capture.relations import relations_of as relations
from collectors.capture.workload_statements import (
    CAPTURE_TIMEOUT,
    IGNORED,
    SourceRead,
    Statement,
    open_source,
    plan_errors,
    read_source,
)
from collectors.servers.targets import redact_conninfo
from detector.errors import PlanshiftError
from detector.jobs.capture_coverage import Coverage, coverage, describe
from detector.jobs.capture_toml import CapturedQuery, query_name, workload_toml
from detector.jobs.workload import load_workload
from detector.model.units import fmt_version

WORKLOAD_FILE = "workload.toml"
SCHEMA_FILE = "schema.sql"
DUMP_FILE = "dump.sql"
COVERAGE_FILE = "coverage.txt"


@dataclass(frozen=True)
class CaptureOptions:
    top: int = 50
    logs: tuple[Path, ...] = ()
    log_line_prefix: str | None = None
    data: bool = False
    # the dump is streamed (memory flat); what grows with the size is the time to load it
    # into each replay target and their disk: bench/bench_capture.py measures both
    max_data_mb: float = 1024.0
    samples: int = 20  # parameter sets kept per query, drawn from all logged executions
    statement_timeout: str = CAPTURE_TIMEOUT
    pg_bins: tuple[Path, ...] = ()
    search_path: str | None = None  # the application's (capture and replay), if not the role's
    exclude: tuple[str, ...] = ()  # regular expressions searched in statement texts


@dataclass
class CaptureReport:
    directory: Path
    source: SourceRead
    redacted_dsn: str
    queries: list[CapturedQuery] = field(default_factory=list)
    skipped: list[Statement] = field(default_factory=list)  # in the top N, not replayable
    logged: LoggedValues | None = None
    files: list[Path] = field(default_factory=list)
    settings: ProductionSettings = field(default_factory=ProductionSettings)
    coverage: Coverage | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def workload(self) -> Path:
        return self.directory / WORKLOAD_FILE

    @property
    def generic(self) -> list[CapturedQuery]:
        return [q for q in self.queries if q.mode == "generic plan"]


def capture_workload(
    dsn: str,
    directory: Path,
    options: CaptureOptions,
    progress: Callable[[str], None] | None = None,
) -> CaptureReport:
    if options.top < 1 or options.samples < 1:
        raise PlanshiftError(
            f"--top {options.top} --samples {options.samples}: expected positive numbers",
            "e.g. --top 50 --samples 20",
        )
    patterns = _patterns(options.exclude)
    notes = private_directory(directory)
    missing = [str(p) for p in options.logs if not p.is_file()]
    if missing:
        raise PlanshiftError(f"no such log file: {', '.join(missing)}", "pass server log files")
    conn = open_source(dsn, options.statement_timeout, options.search_path)
    try:
        source = read_source(conn, patterns)
        settings = read_settings(conn, source.database_oid, source.roles)
    finally:
        conn.close()
    report = CaptureReport(directory, source, redact_conninfo(dsn), settings=settings)
    report.notes = notes + settings.notes
    ranked = [s for s in source.statements if s.kind not in IGNORED][: options.top]
    report.skipped = [s for s in ranked if s.kind != "query"]
    chosen = [s for s in ranked if s.kind == "query"]
    if not chosen:
        raise PlanshiftError(
            f"nothing to replay in database {source.database}: pg_stat_statements has "
            f"{len(ranked)} statements besides utility, monitoring and catalog ones, none a "
            "query planshift can replay",
            "run the application's load first (or pg_stat_statements_reset() was called); "
            "statements that write are not captured",
        )
    size_mb = source.database_bytes / 2**20
    if options.data and size_mb > options.max_data_mb:
        raise PlanshiftError(
            f"database {source.database} is {size_mb:,.0f} MB, more than --max-data-mb "
            f"{options.max_data_mb:g}: too large to copy into every replay target (time and disk)",
            "capture without --data and replay on restored copies with --dsn, or raise "
            "--max-data-mb (the README's capture section has load times per GB)",
        )
    if options.logs:
        wanted = {s.key: s.sql for s in chosen if s.parameters}
        report.logged = read_logged_values(
            options.logs,
            wanted,
            database=source.database,
            log_line_prefix=options.log_line_prefix,
            limit=options.samples,
        )
    samples = report.logged.samples if report.logged else {}
    taken: set[str] = set()
    for s in chosen:
        name = query_name([n for n, _ in relations(s.sql)], s.key, taken)
        found = tuple(samples.get(s.key, ()))
        report.queries.append(
            CapturedQuery(
                name, s.sql, (s.queryid, *s.queryids), s.calls, s.mean_ms, s.total_ms, found
            )
        )
    kept = _plannable(dsn, report, chosen, options)
    report.queries = [query for query, _ in kept]
    report.coverage = coverage(
        source.statements,
        ranked,
        report.skipped,
        [(statement, query.mode == "generic plan") for query, statement in kept],
    )
    major = source.server_version_num // 10000
    report.files.append(
        dump(dsn, major, directory / SCHEMA_FILE, data=False, pg_bins=options.pg_bins)
    )
    if options.data:
        report.files.append(
            dump(
                dsn, major, directory / DUMP_FILE, data=True, pg_bins=options.pg_bins,
                progress=progress,
            )
        )  # fmt: skip
    _write(report.workload, _workload_text(report, options))
    _write(directory / COVERAGE_FILE, "\n".join(report.coverage.lines()) + "\n")
    report.files[:0] = [report.workload, directory / COVERAGE_FILE]
    load_workload(report.workload)  # what capture writes, the loader reads
    return report


def _patterns(exclude: Sequence[str]) -> list[re.Pattern[str]]:
    patterns = []
    for text in exclude:
        try:
            patterns.append(re.compile(text, re.IGNORECASE))
        except re.error as exc:
            raise PlanshiftError(
                f"--exclude {text!r}: not a regular expression: {exc}",
                "--exclude takes a Python regular expression searched in the statement's "
                "text, case-insensitive: --exclude 'FROM audit_log' --exclude '^SELECT .* pg_'",
            ) from None
    return patterns


def private_directory(directory: Path) -> list[str]:
    """Create `directory` 0700; an existing one keeps its mode (it is not ours to change),
    and is named when others can read it."""
    try:
        directory.mkdir(parents=True, mode=PRIVATE_DIRECTORY)
        directory.chmod(PRIVATE_DIRECTORY)  # mkdir's mode passes through the umask
    except FileExistsError:
        if not directory.is_dir():
            raise PlanshiftError(
                f"cannot write to {directory}: not a directory", "pass another -o DIR"
            ) from None
    except OSError as exc:
        raise PlanshiftError(
            f"cannot write to {directory}: {exc.strerror or exc}", "pass another -o DIR"
        ) from None
    mode = directory.stat().st_mode
    if not os.access(directory, os.W_OK):
        raise PlanshiftError(
            f"cannot write to {directory}: permission denied", "pass another -o DIR"
        )
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        return [
            f"{directory} is open to other users (mode {stat.S_IMODE(mode):o}); the files "
            "planshift writes in it are 0600"
        ]
    return []


def _write(path: Path, text: str) -> None:
    with open_private(path) as stream:
        stream.write(text.encode())


def _plannable(
    dsn: str, report: CaptureReport, chosen: Sequence[Statement], options: CaptureOptions
) -> list[tuple[CapturedQuery, Statement]]:
    """The queries the source plans as the workload file will send them (plain EXPLAIN,
    nothing executed); the others join the list of what was not captured."""
    conn = open_source(dsn, options.statement_timeout, options.search_path)
    try:
        errors = plan_errors(
            conn,
            [query.as_sent() for query in report.queries],
            report.source.server_version_num,
            options.statement_timeout,
        )
    finally:
        conn.close()
    kept = []
    for query, statement, error in zip(report.queries, chosen, errors, strict=True):
        if error is None:
            kept.append((query, statement))
        else:
            reason = f"the source does not plan it as replayed: {error}"
            report.skipped.append(replace(statement, kind="unplannable", reason=reason))
    if not kept:
        raise PlanshiftError(
            "none of the captured queries plans on the source as planshift would replay it",
            "; ".join(s.reason for s in report.skipped[-3:]),
        )
    return kept


def _workload_text(report: CaptureReport, options: CaptureOptions) -> str:
    assert report.coverage is not None
    found = report.settings
    settings = dict(sorted(found.values.items()))
    notes = {name: f"production: {origin}" for name, origin in found.origins.items()}
    if options.search_path is not None:
        settings["search_path"] = options.search_path
        notes["search_path"] = "--search-path"
    not_carried = [
        f"{name} = {value} (needs a restart or reload: [[targets]].settings sets it on an "
        "embedded target)"
        for name, value in sorted(found.not_carried.items())
    ]
    source = report.source
    version = fmt_version(source.server_version_num)
    capture = {
        "source": f"PostgreSQL {version}, database {source.database}",
        "coverage": report.coverage.headline,
        "blind": [f"{report.coverage.share(s.ms)} {s.text}" for s in report.coverage.blind],
        "left_out": [
            f"{report.coverage.share(s.ms) if s.counted else '-'} {s.text}"
            for s in report.coverage.left_out
        ],
    }
    if not_carried:
        capture["not_carried"] = [f"{n} = {v}" for n, v in sorted(found.not_carried.items())]
    return workload_toml(
        name=f"capture-{source.database}",
        header=_header(report, options),
        setup_files=[DUMP_FILE if options.data else SCHEMA_FILE],
        settings=settings,
        setting_notes=notes,
        not_carried=not_carried,
        capture=capture,
        queries=report.queries,
        not_captured=[describe(s) for s in report.skipped],
    )


def _header(report: CaptureReport, options: CaptureOptions) -> list[str]:
    source = report.source
    version = fmt_version(source.server_version_num)
    taken = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    major = source.server_version_num // 10000
    lines = [
        f"captured by `planshift capture` at {taken} from {report.redacted_dsn}",
        f"PostgreSQL {version}, database {source.database}: the top {options.top} statements "
        "by total time in pg_stat_statements",
    ]
    if options.data:
        lines.append(
            f"embedded clusters load dump.sql; replay: planshift run workload.toml -t pg{major} "
            "-t pg18"
        )
    else:
        lines.append(
            "schema only (capture --data copies the database): replay on servers holding a "
            "copy of the data: planshift run workload.toml --dsn old=... --dsn new=..."
        )
    lines.append("plans only, nothing executed (safe on production): planshift run --plan-only ...")
    return lines
