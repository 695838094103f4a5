"""The snapshot job: pg_stat_statements (and its info) read into the store."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from detector.jobs.ingest import ANONYMIZED
from detector.store import Store
from detector.version import __version__

if TYPE_CHECKING:
    from collectors.pgss import PgssRead


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
