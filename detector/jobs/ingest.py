"""The ingest job: server logs read into the store, with a report per file."""

from __future__ import annotations

import functools
import logging
import socket
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from collectors.logs.autoexplain import FileReport, IngestOptions, LogIngest, check_log
from collectors.logs.registry import FORMATS
from detector.errors import PlanshiftError
from detector.jobs.progress import progress_bar
from detector.model.units import counted
from detector.store import Store
from detector.version import __version__

log = logging.getLogger(__name__)


INGEST_LABEL = "ingest"


ANONYMIZED = " (anonymized)"  # appended to the run label; targets.info has "anonymized"


def ingest_logs(
    *,
    store_path: Path,
    files: Sequence[Path],
    source: str,
    options: IngestOptions,
    console: Console,
    progress_console: Console | None = None,
) -> list[FileReport]:
    """Ingest each file into a new run with one log target named `source`; `progress_console`
    (stderr) shows the bytes read."""
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        raise PlanshiftError(f"no such log file: {', '.join(missing)}", "pass server log files")
    for path in files:  # a file that is no server log is refused before a run begins
        check_log(path, options)
    reports: list[FileReport] = []
    with Store(store_path) as store:
        # an ingest killed on this host was marked failed when the store opened (settled_runs);
        # one still 'running' here has no live owner either, since the store is ours to write
        kinds = {run.run_id: run.kind for run in store.runs()}
        settled = [r for r in store.settled_runs if kinds.get(r) == "ingest"]
        for run_id in [*settled, *store.interrupted_runs("ingest")]:
            store.finish_run(run_id, "failed")
            console.print(
                f"run {run_id}: an earlier ingest was interrupted; what it stored is kept "
                "and the files resume where it stopped"
            )
        run_id = store.begin_run(
            f"{INGEST_LABEL} {source}" + (ANONYMIZED if options.anonymize else ""),
            workload_hash=None,
            tool_version=__version__,
            host=socket.gethostname(),
            kind="ingest",
        )
        try:
            target_id = store.add_target(
                run_id,
                source,
                source="log",
                server_version_num=None,
                gucs={},
                info={
                    "files": [str(path) for path in files],
                    "source": source,
                    "anonymized": options.anonymize,
                },
            )
            ingest = LogIngest(store, target_id, options)
            for path in files:
                size = None if path.suffix == ".gz" else path.stat().st_size
                log.debug("reading %s (%s bytes) into run %d", path, size or "gzip", run_id)
                with progress_bar(
                    progress_console, size, label=path.name, in_bytes=True
                ) as advance:
                    report = ingest.ingest(path, functools.partial(advance, path.name))
                reports.append(report)
                log_report(report, options)
                print_report(report, console)
            store.finish_run(run_id)
        except BaseException:
            store.finish_run(run_id, "failed")
            raise
        refuse_unreadable(store, reports)
    return reports


def log_report(report: FileReport, options: IngestOptions) -> None:
    """What --debug shows of a file read: how its format and prefix were found, what was
    read and stored, and every problem kept with its line (the store's log_problems has all)."""
    how = "as given by --format" if options.log_format else "detected from its first lines"
    prefix = options.log_line_prefix
    log.debug(
        "%s: format %s%s (%s); log_line_prefix %s",
        report.path, report.log_format, " (gzip)" if report.compressed else "", how,
        repr(prefix) if prefix else "guessed from the common prefixes",
    )  # fmt: skip
    if report.resumed_at_line is not None:
        log.debug("%s: read before: resumed at line %d", report.path, report.resumed_at_line)
    log.debug(
        "%s: %d messages read, %d plans stored, %d server events, %d problems (skipped)",
        report.path, report.messages, report.plans, report.events, report.problem_count,
    )  # fmt: skip
    for problem in report.problems:
        log.debug(
            "%s:%d: skipped: %s: %s", report.path, problem.line, problem.kind, problem.message
        )
    for problem in report.incomplete:
        log.debug("%s:%d: incomplete: %s", report.path, problem.line, problem.message)
    if report.unknown_zones:
        log.debug("%s: time zones not understood: %s", report.path, sorted(report.unknown_zones))


def refuse_unreadable(store: Store, reports: Sequence[FileReport]) -> None:
    """Exit 2 naming the files that yielded nothing readable. What such a file left in the
    store (its ledger row and problems, nothing else) is removed when this ingest made it, so
    that the file is read anew once the right --format or --log-line-prefix is given."""
    found = [(report, why) for report in reports if (why := report.nothing_read())]
    if not found:
        return
    for report, _ in found:
        if report.resumed_at_line is None and report.file_id is not None and not report.events:
            store.forget_log_file(report.file_id)
    listed = "; ".join(f"{report.path} ({report.log_format}): {why}" for report, why in found)
    others = len(reports) - len(found)
    raise PlanshiftError(
        f"nothing readable in {listed}",
        "planshift reads plans of auto_explain.log_format json or text; a log in another "
        f"format than the one named: --format ({', '.join(FORMATS)}) and, for stderr, the "
        "server's --log-line-prefix"
        + (f"; {counted(others, 'other file')} stored" if others else ""),
    )


def print_report(report: FileReport, console: Console) -> None:
    kind = report.log_format + (" (gzip)" if report.compressed else "")
    where = "" if report.resumed_at_line is None else f", resumed at line {report.resumed_at_line}"
    console.print(
        f"{report.path}: {kind}{where}: {report.messages} messages, {report.plans} plans stored, "
        f"{report.events} events (settings, starts, autovacuum, DDL), {report.problem_count} problems",
        markup=False,
        highlight=False,
    )
    for problem in report.problems:
        console.print(
            f"  {report.path}:{problem.line}: {problem.kind}: {problem.message}",
            markup=False,
            highlight=False,
        )
    if report.problem_count > len(report.problems):
        more = report.problem_count - len(report.problems)
        console.print(f"  ... and {more} more (table log_problems)", markup=False)
    for problem in report.incomplete:
        console.print(
            f"  {report.path}:{problem.line}: incomplete at end of file; the next ingest "
            "reads it again",
            markup=False,
            highlight=False,
        )
    for zone in sorted(report.unknown_zones):
        console.print(
            f"  time zone {zone!r} read as --log-timezone (default UTC)",
            markup=False,
            highlight=False,
        )
