"""PostgreSQL's regression suite under auto_explain, logged by a real server in every format.

`regress_logs(cache, regress_dir, plan_format)` starts an embedded PostgreSQL 15 cluster (as an
unprivileged user when run as root) with auto_explain on every statement (log_min_duration 0,
log_analyze, buffers, timing; JSON or text plans) and the logging collector writing stderr,
csvlog and jsonlog at once (the same events in three files), then runs the installation's own
`pg_regress` over the suite's parallel schedule against it (`--use-existing`). Tests that need
the suite's C library (regress.so, not in binary distributions) fail on those statements: the
rest of the suite runs and is logged, which is the point here.

The suite's SQL is not in binary distributions: `regress_dir` is `src/test/regress` of a source
tree of the same major version (Debian: `apt-get source postgresql-15`, with a deb-src line).
The three logs are cached as `cache/regress-<plan_format>.{log,csv,json}` and reused.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.installations import find_installation

PREFIX = "%m [%p] %q%u@%d "
MAJOR = 15
SUFFIXES = {"stderr": ".log", "csvlog": ".csv", "jsonlog": ".json"}


def settings(plan_format: str) -> dict[str, str]:
    return {
        "logging_collector": "on",
        "log_destination": "stderr,csvlog,jsonlog",
        "log_directory": "log",
        "log_filename": "pg.log",
        "log_rotation_size": "0",
        "log_line_prefix": PREFIX,
        "auto_explain.log_min_duration": "0",
        "auto_explain.log_analyze": "on",
        "auto_explain.log_format": plan_format,
        "auto_explain.log_buffers": "on",
        "auto_explain.log_timing": "on",
        "max_connections": "40",
        "jit": "off",
    }


def find_regress_dir(given: Path | None) -> Path | None:
    """The suite's src/test/regress: `given`, $PLANSHIFT_REGRESS_DIR, or inside an installation."""
    candidates = [given] if given else []
    if os.environ.get("PLANSHIFT_REGRESS_DIR"):
        candidates.append(Path(os.environ["PLANSHIFT_REGRESS_DIR"]))
    installation = find_installation(MAJOR)
    candidates.append(installation.bindir.parent / "lib" / "pgxs" / "src" / "test" / "regress")
    for candidate in candidates:
        if (
            candidate
            and (candidate / "sql").is_dir()
            and (candidate / "parallel_schedule").is_file()
        ):
            return candidate
    return None


def regress_logs(cache: Path, regress_dir: Path, plan_format: str) -> dict[str, Path]:
    """{format: path} of the three logs of one run of the suite with `plan_format` plans."""
    logs = {fmt: cache / f"regress-{plan_format}{suffix}" for fmt, suffix in SUFFIXES.items()}
    if all(path.exists() for path in logs.values()):
        return logs
    cache.mkdir(parents=True, exist_ok=True)
    installation = find_installation(MAJOR)
    cluster = EmbeddedCluster(installation, settings=settings(plan_format), name="regress")
    cluster.start()
    try:
        _run_suite(cluster, regress_dir)
        time.sleep(1.0)  # the collector flushes
        for fmt, suffix in SUFFIXES.items():
            source = cluster.data_dir / "log" / f"pg{suffix}"
            shutil.copyfile(source, logs[fmt].with_suffix(".tmp"))
            logs[fmt].with_suffix(".tmp").rename(logs[fmt])
    finally:
        cluster.stop()
    return logs


def _run_suite(cluster: EmbeddedCluster, regress_dir: Path) -> None:
    bindir = cluster.installation.bindir
    pg_regress = bindir.parent / "lib" / "pgxs" / "src" / "test" / "regress" / "pg_regress"
    with psycopg.connect(cluster.conninfo, autocommit=True) as admin:  # --use-existing needs it
        admin.execute("CREATE DATABASE regression TEMPLATE template0")
    with tempfile.TemporaryDirectory(prefix="planshift-regress-") as out:
        os.chmod(out, 0o777)  # the server (another user) writes the tablespace test's files
        command = [
            str(pg_regress),
            "--use-existing",
            f"--host={cluster.socket_dir}",
            f"--port={cluster.port}",
            "--user=postgres",
            f"--bindir={bindir}",
            f"--inputdir={regress_dir}",
            f"--outputdir={out}",
            f"--dlpath={out}",
            f"--schedule={regress_dir / 'parallel_schedule'}",
            "--max-connections=8",
        ]
        # failures are expected (no regress.so); the log is what is wanted
        subprocess.run(command, cwd=out, capture_output=True, timeout=3600, check=False)
