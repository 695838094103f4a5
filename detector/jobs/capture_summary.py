"""What `planshift capture` prints: the queries it captured, what the logs gave, what it left
out and why, production's settings, the coverage, the files and the command that replays them."""

from __future__ import annotations

from detector.jobs.capture import CaptureOptions, CaptureReport
from detector.jobs.capture_coverage import describe
from detector.model.units import counted, fmt_version


def summary(report: CaptureReport, options: CaptureOptions) -> list[str]:
    lines: list[str] = []
    source = report.source
    version = fmt_version(source.server_version_num)
    lines.append(
        f"captured {len(report.queries)} queries of database {source.database} "
        f"(PostgreSQL {version}) into {report.workload}"
    )
    width = max(len(q.name) for q in report.queries)
    for query in report.queries:
        lines.append(
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
        lines.append(
            f"logs: {logged.entries} auto_explain entries, {logged.matched} of captured "
            f"statements{said}"
        )
    if report.skipped:
        lines.append(f"not captured ({len(report.skipped)} of the top {options.top}):")
        for statement in report.skipped:
            lines.append(f"  {describe(statement)}")
    if report.generic:
        why = (
            "no logged execution showed their values (auto_explain logs bound parameters "
            "from PostgreSQL 16 on)"
            if options.logs
            else "--log with auto_explain logs gives their values"
        )
        lines.append(
            f"missing parameters for {counted(len(report.generic), 'query', 'queries')}: "
            "replayed as generic plans "
            f"(plans only, no timings): {why}"
        )
    found = report.settings
    carried = dict(found.values)
    if options.search_path is not None:
        carried["search_path"] = options.search_path
    shown = ", ".join(
        f"{name} {value} ({found.origins.get(name, 'option')})"
        for name, value in sorted(carried.items())
    )
    shown = shown or "none beyond the defaults"
    lines.append(f"production settings, set on every replay target: {shown}")
    if found.not_carried:
        server_level = ", ".join(f"{n} {v}" for n, v in sorted(found.not_carried.items()))
        lines.append(f"not carried (server level: restart or reload): {server_level}")
    lines += [f"note: {note}" for note in report.notes]
    assert report.coverage is not None
    lines += report.coverage.lines()
    lines.append("files: " + ", ".join(str(p) for p in report.files))
    major = source.server_version_num // 10000
    versions = f"-t pg{major} -t pg18" if major < 18 else f"-t pg{major}"
    where = versions if options.data else "--dsn old=DSN --dsn new=DSN"
    lines.append(f"replay: planshift run {report.workload} {where}")
    return lines
