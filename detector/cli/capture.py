"""`planshift capture`: a running system's workload, read-only, as a workload file to replay."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from detector.cli.common import out, user_errors
from detector.model.units import counted


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
        float, typer.Option(help="Largest database --data copies (pg_database_size, MB).")
    ] = 100.0,
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
) -> None:
    """Capture a running system's workload (pg_stat_statements, auto_explain logs, schema)
    without writing to it; replay it with `planshift run DIR/workload.toml`."""
    from detector.jobs.capture import CaptureOptions, capture_workload, one_line

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
    )
    with user_errors():
        report = capture_workload(target, output, options)
    source = report.source
    version = f"{source.server_version_num // 10000}.{source.server_version_num % 10000}"

    def say(text: str) -> None:
        out.print(text, markup=False, highlight=False)

    say(
        f"captured {len(report.queries)} queries of database {source.database} "
        f"(PostgreSQL {version}) into {report.workload}"
    )
    width = max(len(q.name) for q in report.queries)
    for query in report.queries:
        say(
            f"  {query.name:<{width}}  {query.calls:>10} calls  {query.mean_ms:>9.3f} ms mean  "
            f"{query.mode}"
        )
    if report.logged is not None:
        logged = report.logged
        counts = [
            (logged.from_plans, "with values read from their custom plan's conditions"),
            (logged.unbound, "without parameter values (auto_explain before 16 logs no bound "
             "parameters)"),
            (logged.unaligned, "whose values could not be read"),
            (logged.with_null, "with a NULL parameter (a TOML file holds no NULL)"),
            (logged.problems, "broken"),
        ]  # fmt: skip
        said = "".join(f", {count} {what}" for count, what in counts if count)
        say(
            f"logs: {logged.entries} auto_explain entries, {logged.matched} of captured "
            f"statements{said}"
        )
    if report.skipped:
        say(f"not captured ({len(report.skipped)} of the top {options.top}):")
        for statement in report.skipped:
            say(
                f"  {statement.kind:<10} {one_line(statement.sql, 70)} ({statement.calls} calls): {statement.reason}"
            )
    if report.generic:
        why = (
            "no logged execution showed their values (auto_explain logs bound parameters "
            "from PostgreSQL 16 on)"
            if options.logs
            else "--log with auto_explain logs gives their values"
        )
        say(
            f"missing parameters for {counted(len(report.generic), 'query', 'queries')}: "
            "replayed as generic plans "
            f"(plans only, no timings): {why}"
        )
    if report.utility:
        kinds = sorted({(s.sql.split() or ["(empty)"])[0].upper() for s in report.utility})
        say(
            f"ignored {len(report.utility)} utility and catalog statements ({', '.join(kinds[:8])})"
        )
    say("files: " + ", ".join(str(p) for p in report.files))
    major = source.server_version_num // 10000
    versions = f"-t pg{major} -t pg18" if major < 18 else f"-t pg{major}"
    where = versions if options.data else "--dsn old=DSN --dsn new=DSN"
    say(f"replay: planshift run {report.workload} {where}")
