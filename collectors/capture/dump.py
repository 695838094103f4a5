"""The captured database's schema (and, when small, its data) as SQL any embedded cluster loads.

pg_dump comes from the installation of the source's own major version (a newer pg_dump writes
settings an older server rejects). It runs in its own read-only snapshot; planshift adds a lock
wait limit (it never queues behind a production lock) and `default_transaction_read_only`.
The password, when the DSN has one, goes to pg_dump in PGPASSWORD, never on its command line.
Owners, privileges and tablespaces are left out (the roles do not exist on a test cluster).
The dump is plain SQL with the data as COPY (pg_dump's default), written by pg_dump straight
into a file only its owner can read: nothing of it passes through planshift's memory. A run
streams it into each target (collectors/setup_files.py, which skips pg_dump's `\\restrict`
lines), the rows of a table in blocks to COPY.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

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
DUMP_TIMEOUT_S = 6 * 3600
PROGRESS_EVERY_S = 10.0
# after the data: what the planner reads (statistics) and what index-only scans need (the
# visibility map), as a settled production table has them
AFTER_DATA = (
    "\n-- planshift: statistics and visibility map, as a settled source has them\nVACUUM ANALYZE;\n"
)
PRIVATE_FILE = 0o600
PRIVATE_DIRECTORY = 0o700


def open_private(path: Path) -> BinaryIO:
    """`path` for writing, readable by its owner only (0600, whatever the umask), truncated."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    os.fchmod(fd, PRIVATE_FILE)  # a file that existed keeps its mode through O_CREAT
    return os.fdopen(fd, "wb")


def dump(
    dsn: str,
    major: int,
    out: Path,
    *,
    data: bool,
    pg_bins: Sequence[Path] = (),
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Write the schema (with `data`, schema and data) of the DSN's database to `out`, 0600,
    streamed from pg_dump to the file: memory stays flat in the size of the database."""
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
        *(() if data else ("--schema-only",)),
    ]
    with open_private(out) as stream, tempfile.TemporaryFile() as errors:
        try:
            process = subprocess.Popen(command, stdout=stream, stderr=errors, env=env)
        except OSError as exc:
            raise PlanshiftError(f"pg_dump of {redact_conninfo(dsn)} failed: {exc}") from None
        returncode = _wait(process, out, progress)
        if returncode == 0 and data:
            stream.seek(0, os.SEEK_END)  # after what pg_dump wrote through the same descriptor
            stream.write(AFTER_DATA.encode())
        errors.seek(0)
        stderr = errors.read()
    if returncode != 0:
        message = redact_secrets(stderr.decode("utf-8", "replace").strip(), dsn)
        raise PlanshiftError(
            f"pg_dump of {redact_conninfo(dsn)} failed: {message[-800:] or returncode}",
            "the capture role needs to read the schema (and with --data, every table: "
            "pg_read_all_data)",
        )
    return out


def _wait(
    process: subprocess.Popen[bytes], out: Path, progress: Callable[[str], None] | None
) -> int:
    """pg_dump's exit code; a progress line with the bytes written every PROGRESS_EVERY_S."""
    started = time.monotonic()
    try:
        while True:
            try:
                return process.wait(timeout=PROGRESS_EVERY_S)
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - started
                if elapsed > DUMP_TIMEOUT_S:
                    raise PlanshiftError(
                        f"pg_dump ran for more than {DUMP_TIMEOUT_S // 3600} hours; stopped"
                    ) from None
                if progress is not None:
                    size = out.stat().st_size / 2**20
                    progress(f"pg_dump: {size:,.0f} MB written to {out.name}, {elapsed:.0f} s")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
