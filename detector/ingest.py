"""Jobs behind `planshift ingest`, `snapshot` and `setup-check`: wiring collectors to the store."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from collectors.autoexplain_log import FileReport, IngestOptions, LogIngest
from detector import __version__
from detector.errors import PlanshiftError
from detector.store import Store

INGEST_LABEL = "ingest"


def ingest_logs(
    *,
    store_path: Path,
    files: Sequence[Path],
    source: str,
    options: IngestOptions,
    console: Console,
) -> list[FileReport]:
    """Ingest each file into a new run with one log target named `source`."""
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        raise PlanshiftError(f"no such log file: {', '.join(missing)}", "pass server log files")
    reports: list[FileReport] = []
    with Store(store_path) as store:
        for run_id in store.interrupted_runs(INGEST_LABEL):
            store.finish_run(run_id, "failed")
            console.print(
                f"run {run_id}: an earlier ingest was interrupted; what it stored is kept "
                "and the files resume where it stopped"
            )
        run_id = store.begin_run(
            f"{INGEST_LABEL} {source}",
            workload_hash=None,
            tool_version=__version__,
            host=socket.gethostname(),
        )
        try:
            target_id = store.add_target(
                run_id,
                source,
                source="log",
                server_version_num=None,
                gucs={},
                info={"files": [str(path) for path in files], "source": source},
            )
            ingest = LogIngest(store, target_id, options)
            for path in files:
                report = ingest.ingest(path)
                reports.append(report)
                print_report(report, console)
            store.finish_run(run_id)
        except BaseException:
            store.finish_run(run_id, "failed")
            raise
    return reports


def print_report(report: FileReport, console: Console) -> None:
    kind = report.log_format + (" (gzip)" if report.compressed else "")
    where = "" if report.resumed_at_line is None else f", resumed at line {report.resumed_at_line}"
    console.print(
        f"{report.path}: {kind}{where}: {report.messages} messages, {report.plans} plans stored, "
        f"{report.problem_count} problems",
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
