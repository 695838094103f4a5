"""`planshift capture`: a running system's workload, read-only, as a workload file to replay."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from detector.cli.common import out, user_errors


def capture(
    target: Annotated[
        str,
        typer.Option(
            "--target",
            help="DSN of the source database (read-only session; a password belongs in "
            "PGPASSWORD or ~/.pgpass).",
        ),
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Directory for workload.toml, schema.sql ...")
    ],
    log: Annotated[
        list[Path] | None,
        typer.Option(
            "--log",
            help="auto_explain server log (stderr, csvlog, jsonlog; .gz): parameter values of "
            "real executions. Repeatable.",
        ),
    ] = None,
    top: Annotated[
        int, typer.Option(help="Statements to capture, by total time in pg_stat_statements.")
    ] = 50,
    data: Annotated[
        bool,
        typer.Option("--data", help="Also dump the data (small databases), for embedded clusters."),
    ] = False,
    max_data_mb: Annotated[
        float,
        typer.Option(
            help="Largest database --data copies (pg_database_size, MB): each replay target "
            "loads it (the README gives load times per GB)."
        ),
    ] = 1024.0,
    samples: Annotated[
        int, typer.Option(help="Parameter sets per statement, sampled from its logged executions.")
    ] = 20,
    log_line_prefix: Annotated[
        str | None,
        typer.Option(help="The server's log_line_prefix for stderr logs (default: guessed)."),
    ] = None,
    pg_bin: Annotated[
        list[Path] | None,
        typer.Option("--pg-bin", help="bin directory holding the source version's pg_dump."),
    ] = None,
    statement_timeout: Annotated[
        str, typer.Option(help="statement_timeout and lock_timeout of the capture session.")
    ] = "30s",
    search_path: Annotated[
        str | None,
        typer.Option(
            help="The application's search_path (e.g. 'app, public') when its tables are not "
            "on the capture role's; the replay uses it too."
        ),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude",
            help="Leave out statements whose text matches this regular expression (Python "
            "syntax, searched anywhere in the pg_stat_statements text, case-insensitive). "
            "Repeatable. Reported with their share of production time.",
        ),
    ] = None,
) -> None:
    """Capture a running system's workload (pg_stat_statements, auto_explain logs, schema)
    without writing to it; replay it with `planshift run DIR/workload.toml`."""
    from detector.jobs.capture import CaptureOptions, capture_workload
    from detector.jobs.capture_summary import summary

    options = CaptureOptions(
        top=top,
        logs=tuple(log or ()),
        log_line_prefix=log_line_prefix,
        data=data,
        max_data_mb=max_data_mb,
        samples=samples,
        pg_bins=tuple(pg_bin or ()),
        statement_timeout=statement_timeout,
        search_path=search_path,
        exclude=tuple(exclude or ()),
    )

    def say(text: str) -> None:
        out.print(text, markup=False, highlight=False)

    with user_errors():
        report = capture_workload(target, output, options, progress=say)
    for line in summary(report, options):
        say(line)
