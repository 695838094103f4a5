"""`planshift ingest/snapshot/timeline/setup-check` commands: registered on the app of detector.cli.app."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from detector.cli.common import (
    DEFAULT_STORE,
    AsOfOption,
    FormatOption,
    LakeDataOption,
    LakeOption,
    SinceOption,
    StoreOption,
    UntilOption,
    check_format,
    out,
    print_json,
    progress,
    user_errors,
)
from detector.errors import PlanshiftError
from detector.reports.consoles import discard

AnonymizeOption = Annotated[
    bool,
    typer.Option(
        "--anonymize",
        help="Store no literals: SQL normalized, no parameter values, plan constants masked.",
    ),
]

HostStoreOption = Annotated[
    Path | None,
    typer.Option(
        "--store",
        "-s",
        help="DuckDB file holding runs and observations (default: planshift.duckdb; with --lake, "
        "the host's own store under ~/.local/share/planshift/lakes, see README, Fleets).",
    ),
]


def store_for(store: Path | None, lake: str | None, host: str | None) -> Path:
    """--store, else with --lake the host's own store (never a file hosts share), else the
    default store."""
    if store is not None:
        return store
    if lake is not None and host is not None:
        from detector.jobs.lake import host_store

        return host_store(lake, host)
    return DEFAULT_STORE


# -- postmortem: auto_explain logs, pg_stat_statements snapshots, timeline, setup check ----


def ingest(
    logs: Annotated[
        list[Path],
        typer.Argument(
            help="Server log files (stderr, csvlog, jsonlog; RDS, CloudNativePG, Cloud SQL; "
            "plain or .gz)."
        ),
    ],
    store: HostStoreOption = None,
    source: Annotated[
        str, typer.Option("--source", help="Name of the log target (e.g. the server).")
    ] = "log",
    log_line_prefix: Annotated[
        str | None,
        typer.Option(
            help="The server's log_line_prefix (stderr logs); default: guess common ones."
        ),
    ] = None,
    log_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="stderr, csvlog, jsonlog, rds, cnpg, cloudsql or syslog (default: detect).",
        ),
    ] = None,
    log_timezone: Annotated[
        str | None, typer.Option(help="Zone for timestamps with abbreviations like CET.")
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs", "-j", min=1, help="Processes parsing logs over 32 MB (default: one per core)."
        ),
    ] = None,
    anonymize: AnonymizeOption = False,
    lake: LakeOption = None,
    lake_data: LakeDataOption = None,
    source_from: Annotated[
        str | None,
        typer.Option(
            "--source-from",
            help="Many hosts' logs at once, with --lake: the host name from each path, e.g. "
            "'{host}/postgresql-*.log' (LOGS: directories or globs; --store: a directory of "
            "one store per host).",
        ),
    ] = None,
) -> None:
    """Store the auto_explain plans of server logs as observations (resumable, idempotent);
    with --lake, then export this host's store (--source names the host) to the lake."""
    from collectors.logs.autoexplain import IngestOptions
    from detector.jobs.ingest import ingest_logs

    options = IngestOptions(
        log_line_prefix=log_line_prefix,
        log_format=log_format,
        log_timezone=log_timezone,
        anonymize=anonymize,
    )
    if jobs is not None:
        options = replace(options, workers=jobs)
    if source_from is not None:
        from detector.jobs.ingest_hosts import ingest_hosts

        with user_errors():
            ingest_hosts(
                logs, source_from, lake=lake, lake_data=lake_data, stores=store,
                options=options, console=out, progress_console=progress,
            )  # fmt: skip
        return
    with user_errors():
        store = store_for(store, lake, source)
        reports = ingest_logs(
            store_path=store,
            files=logs,
            source=source,
            options=options,
            console=out,
            progress_console=progress,
        )
    plans = sum(report.plans for report in reports)
    problems = sum(report.problem_count for report in reports)
    out.print(f"{plans} plans from {len(reports)} files stored in {store}; {problems} problems")
    if lake is not None:
        from detector.jobs.lake import export_after_ingest, lake_name

        with user_errors():
            sent = export_after_ingest(store, lake, source, lake_data)
            name = lake_name(lake)
        out.print(f"host {source}: {sent} observations in lake {name}", markup=False)


def snapshot(
    target: Annotated[str, typer.Option("--target", "-t", help="DSN of the server to read.")],
    store: HostStoreOption = None,
    name: Annotated[
        str | None, typer.Option(help="Name of the server in the store (default: host/dbname).")
    ] = None,
    anonymize: AnonymizeOption = False,
    lake: LakeOption = None,
    lake_data: LakeDataOption = None,
) -> None:
    """Store one snapshot of pg_stat_statements (run it periodically, e.g. from cron); with
    --lake, then export the store to the lake as the host --name."""
    from detector.jobs.lake import export_after_ingest
    from detector.jobs.snapshot import take_snapshot

    with user_errors():
        if lake is not None and name is None:
            raise PlanshiftError(
                "--lake needs --name", "the host's name in the lake, e.g. --name db1"
            )
        path = store_for(store, lake, name)
        take_snapshot(store_path=path, dsn=target, name=name, console=out, anonymize=anonymize)
        if lake is not None and name is not None:
            export_after_ingest(path, lake, name, lake_data)


def timeline(
    store: StoreOption = DEFAULT_STORE,
    query: Annotated[
        str | None, typer.Option("--query", "-q", help="Query key (or its prefix) or name.")
    ] = None,
    since: SinceOption = None,
    until: UntilOption = None,
    source: Annotated[str | None, typer.Option(help="Only this log source.")] = None,
    limit: Annotated[int, typer.Option(help="Show at most this many queries.")] = 20,
    top: Annotated[
        int | None,
        typer.Option(
            "--top",
            min=1,
            help="Instead: the N top queries of the window, from logs and pg_stat_statements.",
        ),
    ] = None,
    order: Annotated[
        str, typer.Option("--by", help="Order of --top: total (time), calls or mean.")
    ] = "total",
    output_format: FormatOption = "terminal",
    lake: LakeOption = None,
    as_of: AsOfOption = None,
) -> None:
    """Plan fingerprints of each logged query over time: flips marked, pgss deltas around them."""
    from detector.jobs.lake import store_or_lake
    from detector.jobs.timeline import show_timeline
    from detector.jobs.top import show_top
    from detector.reports.timeline.json_doc import timeline_document
    from detector.reports.timeline.top import top_document

    as_json = check_format(output_format)
    console = discard() if as_json else out
    if top is not None:
        with user_errors(), store_or_lake(store, lake, source, since, until, as_of=as_of) as path:
            found = show_top(
                store_path=path,
                since=since,
                until=until,
                source=source,
                order=order,
                limit=top,
                console=console,
            )
        if as_json:
            print_json(top_document(found))
        return
    with user_errors(), store_or_lake(store, lake, source, since, until, query, as_of) as path:
        timelines = show_timeline(
            store_path=path,
            query=query,
            since=since,
            until=until,
            source=source,
            limit=limit,
            console=console,
        )
    if as_json:
        print_json(timeline_document(timelines[:limit]))


def setup_check(
    target: Annotated[str, typer.Option("--target", "-t", help="DSN of the server to check.")],
    output_format: FormatOption = "terminal",
) -> None:
    """Report auto_explain / pg_stat_statements settings and the ones planshift recommends;
    exit 1 when the server is not ready (settings to change), 2 when it cannot be checked."""
    from detector.jobs.setup_check import setup_check as run_check
    from detector.reports.setup_check import ready, render_setup_check, setup_check_document

    as_json = check_format(output_format)
    with user_errors():
        version, checks, snippet = run_check(dsn=target)
    if as_json:
        print_json(setup_check_document(version, checks, snippet))
    else:
        render_setup_check(version, checks, snippet, out)
    raise typer.Exit(0 if ready(checks) else 1)
