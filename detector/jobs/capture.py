"""`planshift capture`: a running system's workload as a workload file planshift can replay.

Read-only on the source (collectors/capture.py says how): the top statements of
pg_stat_statements by total time, their parameters from auto_explain logs when given
(collectors/capture_params.py), the schema and, for a small database, the data from pg_dump
(collectors/capture_dump.py). Written to DIR: workload.toml, schema.sql, dump.sql (--data).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from collectors.capture import (
    CAPTURE_TIMEOUT,
    IGNORED,
    SourceRead,
    Statement,
    open_source,
    plan_errors,
    read_source,
)
from collectors.capture import relations_of as relations
from collectors.capture_dump import dump
from collectors.capture_params import LoggedValues, read_logged_values
from collectors.servers.targets import redact_conninfo
from detector.errors import PlanshiftError
from detector.jobs.capture_toml import CapturedQuery, query_name, workload_toml
from detector.jobs.workload import load_workload

WORKLOAD_FILE = "workload.toml"
SCHEMA_FILE = "schema.sql"
DUMP_FILE = "dump.sql"


@dataclass(frozen=True)
class CaptureOptions:
    top: int = 50
    logs: tuple[Path, ...] = ()
    log_line_prefix: str | None = None
    data: bool = False
    max_data_mb: float = 100.0  # the dump is loaded statement by statement on each cluster
    samples: int = 20  # parameter sets kept per query, drawn from all logged executions
    statement_timeout: str = CAPTURE_TIMEOUT
    pg_bins: tuple[Path, ...] = ()
    search_path: str | None = None  # the application's (capture and replay), if not the role's


@dataclass
class CaptureReport:
    directory: Path
    source: SourceRead
    redacted_dsn: str
    queries: list[CapturedQuery] = field(default_factory=list)
    skipped: list[Statement] = field(default_factory=list)  # in the top N, not replayable
    utility: list[Statement] = field(default_factory=list)  # BEGIN, SET, DDL ...: not ranked
    logged: LoggedValues | None = None
    files: list[Path] = field(default_factory=list)

    @property
    def workload(self) -> Path:
        return self.directory / WORKLOAD_FILE

    @property
    def generic(self) -> list[CapturedQuery]:
        return [q for q in self.queries if q.mode == "generic plan"]


def one_line(sql: str, width: int = 100) -> str:
    text = re.sub(r"\s+", " ", sql).strip()
    return text if len(text) <= width else text[: width - 3] + "..."


def capture_workload(dsn: str, directory: Path, options: CaptureOptions) -> CaptureReport:
    if options.top < 1 or options.samples < 1:
        raise PlanshiftError(
            f"--top {options.top} --samples {options.samples}: expected positive numbers",
            "e.g. --top 50 --samples 20",
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not os.access(directory, os.W_OK):
            raise PermissionError(13, "permission denied")
    except OSError as exc:
        raise PlanshiftError(
            f"cannot write to {directory}: {exc.strerror or exc}", "pass another -o DIR"
        ) from None
    missing = [str(p) for p in options.logs if not p.is_file()]
    if missing:
        raise PlanshiftError(f"no such log file: {', '.join(missing)}", "pass server log files")
    conn = open_source(dsn, options.statement_timeout, options.search_path)
    try:
        source = read_source(conn)
    finally:
        conn.close()
    report = CaptureReport(directory, source, redact_conninfo(dsn))
    ranked = [s for s in source.statements if s.kind not in IGNORED][: options.top]
    report.utility = [s for s in source.statements if s.kind in IGNORED]
    report.skipped = [s for s in ranked if s.kind != "query"]
    chosen = [s for s in ranked if s.kind == "query"]
    if not chosen:
        raise PlanshiftError(
            f"nothing to replay in database {source.database}: pg_stat_statements has "
            f"{len(ranked)} statements besides utility ones, none a query planshift can replay",
            "run the application's load first (or pg_stat_statements_reset() was called); "
            "statements that write are not captured",
        )
    size_mb = source.database_bytes / 2**20
    if options.data and size_mb > options.max_data_mb:
        raise PlanshiftError(
            f"database {source.database} is {size_mb:.0f} MB, more than --max-data-mb "
            f"{options.max_data_mb:g}: too large to copy into embedded clusters",
            "capture without --data and replay on restored copies with --dsn, or raise "
            "--max-data-mb",
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
    report.queries = _plannable(dsn, report, chosen, options)
    major = source.server_version_num // 10000
    report.files.append(
        dump(dsn, major, directory / SCHEMA_FILE, data=False, pg_bins=options.pg_bins)
    )
    if options.data:
        report.files.append(
            dump(dsn, major, directory / DUMP_FILE, data=True, pg_bins=options.pg_bins)
        )
    text = workload_toml(
        name=f"capture-{source.database}",
        header=_header(report, options),
        setup_files=[DUMP_FILE if options.data else SCHEMA_FILE],
        settings={} if options.search_path is None else {"search_path": options.search_path},
        queries=report.queries,
        not_captured=[
            f"{s.kind}: {one_line(s.sql)} ({s.calls} calls): {s.reason}" for s in report.skipped
        ],
    )
    report.workload.write_text(text)
    report.files.insert(0, report.workload)
    load_workload(report.workload)  # what capture writes, the loader reads
    return report


def _plannable(
    dsn: str, report: CaptureReport, chosen: Sequence[Statement], options: CaptureOptions
) -> list[CapturedQuery]:
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
            kept.append(query)
        else:
            reason = f"the source does not plan it as replayed: {error}"
            report.skipped.append(replace(statement, kind="unplannable", reason=reason))
    if not kept:
        raise PlanshiftError(
            "none of the captured queries plans on the source as planshift would replay it",
            "; ".join(s.reason for s in report.skipped[-3:]),
        )
    return kept


def _header(report: CaptureReport, options: CaptureOptions) -> list[str]:
    source = report.source
    version = f"{source.server_version_num // 10000}.{source.server_version_num % 10000}"
    taken = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"captured by `planshift capture` at {taken} from {report.redacted_dsn}",
        f"PostgreSQL {version}, database {source.database}: the top {options.top} statements "
        "by total time in pg_stat_statements",
    ]
    if options.data:
        lines.append(
            "embedded clusters load dump.sql; replay: planshift run workload.toml -t pg15 -t pg18"
        )
    else:
        lines.append(
            "schema only (capture --data copies a small database): replay on servers holding a "
            "copy of the data: planshift run workload.toml --dsn old=... --dsn new=..."
        )
    lines.append("plans only, nothing executed (safe on production): planshift run --plan-only ...")
    return lines
