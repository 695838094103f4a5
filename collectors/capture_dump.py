"""The captured database's schema (and, when small, its data) as SQL any embedded cluster loads.

pg_dump comes from the installation of the source's own major version (a newer pg_dump writes
settings an older server rejects). It runs in its own read-only snapshot; planshift adds a lock
wait limit (it never queues behind a production lock) and `default_transaction_read_only`.
The password, when the DSN has one, goes to pg_dump in PGPASSWORD, never on its command line.
Owners, privileges and tablespaces are left out (the roles do not exist on a test cluster);
psql meta-commands (`\\restrict`, 15.14+) are dropped, so planshift's SQL splitter reads it.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from collectors.servers.installations import find_installation
from collectors.servers.targets import redact_conninfo, redact_secrets
from detector.errors import PlanshiftError

DUMP_OPTIONS = (
    "--no-owner",
    "--no-privileges",
    "--no-tablespaces",
    "--no-publications",
    "--no-subscriptions",
    "--no-security-labels",
    "--lock-wait-timeout=10s",
)
DATA_OPTIONS = ("--inserts", "--rows-per-insert=1000")
DUMP_TIMEOUT_S = 3600
META = re.compile(r"\\(?:un)?restrict [A-Za-z0-9]+\n?")
# after the data: what the planner reads (statistics) and what index-only scans need (the
# visibility map), as a settled production table has them
AFTER_DATA = (
    "\n-- planshift: statistics and visibility map, as a settled source has them\nVACUUM ANALYZE;\n"
)


def dump(dsn: str, major: int, out: Path, *, data: bool, pg_bins: Sequence[Path] = ()) -> Path:
    """Write the schema (with `data`, schema and data) of the DSN's database to `out`."""
    try:
        installation = find_installation(major, pg_bins)
    except PlanshiftError as exc:
        raise PlanshiftError(
            f"no PostgreSQL {major} installation for pg_dump: {exc.message}",
            f"the schema is dumped with pg_dump {major}, the source's version: install it, or "
            "pass --pg-bin with its bin directory",
        ) from None
    pg_dump = installation.bindir / "pg_dump"
    if not pg_dump.is_file():
        raise PlanshiftError(
            f"{installation.describe()} has no pg_dump", "pass --pg-bin with a full installation"
        )
    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    password = params.pop("password", None)
    env = dict(os.environ)
    if password is not None:
        env["PGPASSWORD"] = str(password)
    env["PGOPTIONS"] = (env.get("PGOPTIONS", "") + " -c default_transaction_read_only=on").strip()
    command = [
        str(pg_dump),
        f"--dbname={make_conninfo(**params)}",
        *DUMP_OPTIONS,
        *(DATA_OPTIONS if data else ("--schema-only",)),
    ]
    try:
        result = subprocess.run(
            command, capture_output=True, env=env, timeout=DUMP_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PlanshiftError(f"pg_dump of {redact_conninfo(dsn)} failed: {exc}") from None
    if result.returncode != 0:
        message = redact_secrets(result.stderr.decode("utf-8", "replace").strip(), dsn)
        raise PlanshiftError(
            f"pg_dump of {redact_conninfo(dsn)} failed: {message[-800:]}",
            "the capture role needs to read the schema (and with --data, every table: "
            "pg_read_all_data)",
        )
    out.write_text(loadable(result.stdout.decode("utf-8")) + (AFTER_DATA if data else ""))
    return out


def loadable(text: str) -> str:
    """pg_dump's plain output without its psql meta-commands (`\\restrict KEY` and
    `\\unrestrict KEY`, whole lines: a line of a multi-line string value stays)."""
    return "".join(line for line in text.splitlines(keepends=True) if not META.fullmatch(line))
