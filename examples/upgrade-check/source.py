"""The "production" side of the pre-upgrade check: PostgreSQL 15 under a real client, captured.

Starts an embedded PostgreSQL 15 with auto_explain (every plan logged, JSON) and
pg_stat_statements, loads pgbench's tables (scale 2: 200,000 accounts), drives it with pgbench
(its select-only script over the simple and the prepared protocol, the two scripts of this
folder, and its write script), then runs `planshift capture` against it, read-only, while it
is still up, and stops it. What is left is the capture directory: workload.toml, schema.sql,
dump.sql. About 30 s on 2 cores.

    .venv/bin/python examples/upgrade-check/source.py [OUTPUT_DIR]   # default: ./upgrade-check
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from collectors.servers.embedded import EmbeddedCluster  # noqa: E402
from collectors.servers.installations import find_installation  # noqa: E402

SETTINGS = {
    "auto_explain.log_min_duration": "0",  # every plan (production would use a threshold)
    "auto_explain.log_format": "json",
    "auto_explain.log_analyze": "off",
    "log_line_prefix": "%m [%p] %q%u@%d ",
}
# (what it is, pgbench arguments): about 10,000 transactions
LOAD = (
    ("select-only, simple protocol", ["-S", "-M", "simple", "-c", "2", "-t", "2000"]),
    ("select-only, prepared protocol", ["-S", "-M", "prepared", "-c", "2", "-t", "2000"]),
    ("lookup3.sql, simple protocol", ["-f", str(HERE / "lookup3.sql"), "-c", "2", "-t", "1500"]),
    (
        "report.sql, prepared protocol",
        ["-f", str(HERE / "report.sql"), "-M", "prepared", "-t", "60"],
    ),
    ("simple-update (writes), prepared", ["-N", "-M", "prepared", "-t", "500"]),
)


def main(out: Path) -> None:
    installation = find_installation(15)
    pgbench = installation.bindir / "pgbench"
    planshift = Path(sys.executable).parent / "planshift"
    with EmbeddedCluster(installation, settings=SETTINGS, name="production") as cluster:
        with psycopg.connect(cluster.conninfo, autocommit=True) as conn:
            conn.execute("CREATE DATABASE bank")
        dsn = make_conninfo(cluster.conninfo, dbname="bank")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        env = {**os.environ, "PGHOST": str(cluster.socket_dir), "PGPORT": str(cluster.port)}
        env["PGUSER"] = "postgres"
        started = time.monotonic()
        initialize = [str(pgbench), "-i", "-s", "2", "-q", "bank"]
        subprocess.run(initialize, env=env, check=True, capture_output=True)
        for what, arguments in LOAD:
            done = subprocess.run(
                [str(pgbench), *arguments, "bank"], env=env, check=True, capture_output=True
            )
            tps = [line for line in done.stdout.decode().splitlines() if line.startswith("tps")]
            print(f"pgbench {what}: {tps[0].split(' (')[0] if tps else 'done'}", flush=True)
        print(f"load: {time.monotonic() - started:.0f} s; capturing", flush=True)
        log = cluster.log_path
        command = [str(planshift), "capture", "--target", dsn, "--log", str(log), "--data"]
        subprocess.run([*command, "-o", str(out)], check=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("upgrade-check"))
