"""Many hosts' logs into a lake from one process: `ingest DIR --source-from '{host}/*.log'`.

A box that collects the logs of a fleet pays process start and a lake connection once, not per
host: the host of each file is read from its path by the pattern, each host ingests into its
own store (the ledger that makes re-ingesting idempotent: `--store` is then a directory, one
`HOST.duckdb` per host; without it, each host's default store of the lake), and the hosts are
exported to the lake over one connection.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from collectors.logs.autoexplain import IngestOptions
from detector.errors import PlanshiftError
from detector.jobs.ingest import ingest_logs
from detector.jobs.lake import host_store
from detector.store.lake import check_host
from detector.store.lakes import open_lake

HOST = "{host}"


def host_pattern(pattern: str) -> re.Pattern[str]:
    """`{host}/postgresql-*.log` as a regular expression over the end of a path: `*` and `?`
    within one directory, `**` across directories, `{host}` one directory name or part of one."""
    if pattern.count(HOST) != 1:
        raise PlanshiftError(
            f"--source-from {pattern!r} must hold {HOST} once",
            "e.g. --source-from '{host}/postgresql-*.log' or 'logs/{host}.log'",
        )
    parts = re.split(r"(\{host\}|\*\*/?|\*|\?)", pattern.strip("/"))
    regex = "".join(
        "(?P<host>[^/]+?)" if part == HOST
        else "(?:.*/)?" if part in ("**/", "**")
        else "[^/]*" if part == "*"
        else "[^/]" if part == "?"
        else re.escape(part)
        for part in parts
    )  # fmt: skip
    return re.compile(f"(?:^|/){regex}$")


def logs_by_host(arguments: Sequence[Path], pattern: str) -> dict[str, list[Path]]:
    """The log files named (files, directories walked, globs expanded), by host."""
    matcher = host_pattern(pattern)
    found: dict[str, list[Path]] = {}
    unmatched = []
    for argument in arguments:
        text = str(argument)
        if argument.is_dir():
            candidates = [p for p in sorted(argument.rglob("*")) if p.is_file()]
            base = argument
        elif any(c in text for c in "*?["):
            candidates = [
                Path(p) for p in sorted(glob.glob(text, recursive=True)) if Path(p).is_file()
            ]
            base = Path(text.split("*")[0].split("?")[0]).parent if "/" in text else Path()
        else:
            candidates, base = [argument], argument.parent
        for path in candidates:
            relative = (
                path.relative_to(base).as_posix() if path.is_relative_to(base) else path.as_posix()
            )
            match = matcher.search(relative) or matcher.search(path.as_posix())
            if match is None:
                if not argument.is_dir():
                    unmatched.append(str(path))
                continue
            found.setdefault(check_host(match.group("host")), []).append(path)
    if unmatched:
        raise PlanshiftError(
            f"the host of {', '.join(unmatched[:3])} cannot be read with --source-from {pattern!r}",
            "give a pattern that matches every file named, e.g. '{host}/postgresql-*.log'",
        )
    if not found:
        raise PlanshiftError(
            f"no log file matches --source-from {pattern!r} in {', '.join(map(str, arguments))}",
            "the pattern is matched against the end of each path, e.g. '{host}/postgresql-*.log'",
        )
    return {host: sorted(set(paths)) for host, paths in sorted(found.items())}


def ingest_hosts(
    arguments: Sequence[Path],
    pattern: str,
    *,
    lake: str | None,
    lake_data: str | None,
    stores: Path | None,
    options: IngestOptions,
    console: Console,
    progress_console: Console | None = None,
) -> dict[str, int]:
    """Ingest each host's logs into `stores/HOST.duckdb` (without `stores`: each host's own
    store of the lake, detector.jobs.lake.host_store), then export the hosts to the lake; the
    plans stored per host."""
    if lake is None:
        raise PlanshiftError(
            "--source-from ingests into a lake", "add --lake DIR or --lake ducklake:CATALOG"
        )
    target = open_lake(lake, data=lake_data)
    by_host = logs_by_host(arguments, pattern)
    if stores is not None and stores.exists() and not stores.is_dir():
        raise PlanshiftError(f"{stores} is a file", "with --source-from, --store names a directory")
    plans = {}
    paths = {}
    for host, files in by_host.items():
        paths[host] = stores / f"{host}.duckdb" if stores is not None else host_store(lake, host)
        reports = ingest_logs(
            store_path=paths[host], files=files, source=host, options=options,
            console=Console(quiet=True), progress_console=progress_console,
        )  # fmt: skip
        plans[host] = sum(r.plans for r in reports)
        problems = sum(r.problem_count for r in reports)
        console.print(
            f"host {host}: {plans[host]} plans from {len(files)} files in {paths[host]}; {problems} problems",
            markup=False,
        )
    sent = target.export_hosts([(paths[h], h) for h in by_host])
    observations = sum(counts.get("observations", 0) for counts in sent.values())
    console.print(
        f"{len(by_host)} hosts: {observations} observations in lake {target.name}", markup=False
    )
    return plans
