"""Jobs behind `planshift ingest`, `snapshot` and `setup-check`: wiring collectors to the store."""

from __future__ import annotations

import functools
import logging
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from collectors.logs.autoexplain import FileReport, IngestOptions, LogIngest, check_log
from collectors.logs.records import FORMATS
from detector.errors import PlanshiftError
from detector.jobs.progress import progress_bar
from detector.model.identity import text_query_key
from detector.model.units import counted
from detector.store import Store
from detector.version import __version__

if TYPE_CHECKING:  # the timeline's modules are imported by the commands that use them
    from collectors.pgss import PgssRead
    from collectors.setup_check import Check
    from detector.engine.timeline.build import PgssDelta, QueryTimeline
    from detector.engine.timeline.top import TopQueries

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
        log.debug("%s:%d: skipped: %s: %s", report.path, problem.line, problem.kind, problem.message)
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


def take_snapshot(
    *, store_path: Path, dsn: str, name: str | None, console: Console, anonymize: bool = False
) -> int:
    """Read pg_stat_statements once and store it as a snapshot of the server `name`
    (`anonymize`: statement texts normalized, utility statements' literals included)."""
    from collectors.pgss import connect, read_pgss

    with connect(dsn) as conn:
        read = read_pgss(conn, anonymize=anonymize)
    return store_snapshot(store_path, read, name, console, anonymize=anonymize)


def store_snapshot(
    store_path: Path,
    read: PgssRead,
    name: str | None,
    console: Console,
    *,
    anonymize: bool = False,
) -> int:
    """Store one read of pg_stat_statements as a snapshot of the server `name`; its id."""
    source = name or _server_name(read.redacted_dsn)
    with Store(store_path) as store:
        run_id = store.begin_run(
            f"snapshot {source}" + (ANONYMIZED if anonymize else ""),
            workload_hash=None,
            tool_version=__version__,
            host=socket.gethostname(),
            kind="snapshot",
        )
        target_id = store.add_target(
            run_id,
            source,
            source="dsn",
            server_version_num=read.server_version_num,
            gucs={},
            info={"dsn": read.redacted_dsn, "server": source, "anonymized": anonymize},
        )
        with store.transaction():
            snapshot_id = store.add_pgss_snapshot(target_id, read.entries, taken_at=read.taken_at)
            store.add_pgss_info(snapshot_id, read.dealloc, read.stats_reset)
        store.finish_run(run_id)
    console.print(
        f"snapshot {snapshot_id} of {source}: {len(read.entries)} statements "
        f"(dealloc {read.dealloc}, stats reset {read.stats_reset})",
        markup=False,
        highlight=False,
    )
    return snapshot_id


def _server_name(redacted: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(redacted)
    except Exception:  # an unusual DSN: name it generically
        return "server"
    host = str(parts.get("host") or "local").split(",")[0]
    host = "local" if host.startswith("/") else host
    return f"{host}/{parts.get('dbname') or parts.get('user') or 'postgres'}"


def show_timeline(
    *,
    store_path: Path,
    query: str | None,
    since: str | None,
    until: str | None,
    source: str | None,
    limit: int,
    console: Console,
) -> list[QueryTimeline]:
    """Print each query's plan segments and flips, with pg_stat_statements around them."""
    from detector.engine.timeline.build import build_timeline, parse_time, store_pgss_deltas
    from detector.reports.timeline_terminal import render_timeline

    if not store_path.exists():
        raise PlanshiftError(f"store {store_path} does not exist", "run `planshift ingest` first")
    with Store(store_path, read_only=True) as store:
        reference = store.latest_log_time()
        start = parse_time(since, reference) if since else None
        end = parse_time(until, reference) if until else None
        timelines = build_timeline(store, query=query, since=start, until=end, source=source)
        deltas = store_pgss_deltas(store)
    if not timelines:
        raise PlanshiftError(
            "no logged plans in that window", "ingest auto_explain logs with `planshift ingest`"
        )
    attach_pgss(timelines, deltas)
    for timeline in timelines[:limit]:
        render_timeline(timeline, console)
    if len(timelines) > limit:
        console.print(f"... {len(timelines) - limit} more queries (--limit, --query)")
    return timelines


def show_top(
    *,
    store_path: Path,
    since: str | None,
    until: str | None,
    source: str | None,
    order: str,
    limit: int,
    console: Console,
) -> TopQueries:
    """Print the window's top queries from the logs and from pg_stat_statements deltas."""
    from detector.engine.timeline.build import parse_time, store_pgss_deltas
    from detector.engine.timeline.top import TopQueries, check_order, top_from_logs, top_from_pgss
    from detector.reports.timeline_top import render_top

    check_order(order)
    if not store_path.exists():
        raise PlanshiftError(f"store {store_path} does not exist", "run `planshift ingest` first")
    with Store(store_path, read_only=True) as store:
        reference = store.latest_log_time()
        start = parse_time(since, reference) if since else None
        end = parse_time(until, reference) if until else None
        rows = store.log_observations(start, end, None, source)
        logs = top_from_logs(rows, dict(store.queries()), order, limit)
        pgss = top_from_pgss(store_pgss_deltas(store, source), start, end, order, limit)
    if not logs and not pgss:
        raise PlanshiftError(
            "no logged plans or pg_stat_statements deltas in that window",
            "ingest logs with `planshift ingest`, take snapshots with `planshift snapshot`",
        )
    top = TopQueries(start, end, order, logs, pgss)
    render_top(top, console)
    return top


def attach_pgss(timelines: Sequence[QueryTimeline], deltas: Sequence[PgssDelta]) -> None:
    """pgss deltas of the same statement (queryid, else normalized-text fingerprint), kept
    when their interval touches the timeline's time range."""
    keys: dict[str, str] = {}
    for timeline in timelines:
        first, last = timeline.segments[0].start, timeline.segments[-1].end
        for delta in deltas:
            same = delta.queryid in timeline.queryids
            if not same and delta.query:
                if delta.query not in keys:
                    keys[delta.query] = text_query_key(delta.query)
                same = keys[delta.query] == timeline.query_key
            if same and delta.end >= first and delta.start <= last:
                timeline.pgss.append(delta)


def setup_check(*, dsn: str) -> tuple[int, list[Check], str]:
    """How the server is set up for postmortems: (server_version_num, the checks, the
    postgresql.conf lines planshift recommends, "" when nothing is to change)."""
    from collectors.pgss import connect
    from collectors.setup_check import check_server, config_snippet

    with connect(dsn) as conn:
        version, checks = check_server(conn)
    return version, checks, config_snippet(checks)
