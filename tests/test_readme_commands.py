"""Every `planshift` command in the README's ```sh blocks runs as written, in order.

The commands run in a temporary directory holding `workload.toml` (a tiny workload with the
README's variants `current` and `proposed`), with `planshift` the venv's. The README's example
DSN is mapped to a real database on an embedded PostgreSQL 15 that holds the workload's tables.
Blocks of sections another test owns, or that need what a test cannot give, are listed in
SKIPPED with the reason; a new section's block runs unless added there.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from capture_sources import upgrade_source
from helpers import FreshDb

from collectors.servers.embedded import EmbeddedCluster

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PLANSHIFT = Path(sys.executable).parent / "planshift"

UPGRADE = "Upgrade from PostgreSQL 14"
SKIPPED = {
    "The two commands": "make demo / make test are the harness that runs this test",
    "Postmortems": "needs a production server and its logs (tests/test_timeline.py, test_ingest.py)",
    "Fleets": "needs hosts, their logs and a catalog (tests/test_lake.py, test_lake_layouts.py run these commands on captured logs)",
    UPGRADE: "needs a PostgreSQL 14 source: test_the_upgrade_example_runs_as_written runs it",
}
README_DSN = "postgresql://app@db1/app"
# the upgrade example's source and its server log
UPGRADE_DSN = "postgresql://dba@db14/shop"
UPGRADE_LOG = "/var/log/postgresql/postgresql-14-main.log"

SETUP = """
DROP TABLE IF EXISTS t;
CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO t SELECT i, i % 100 FROM generate_series(1, 20000) i;
VACUUM ANALYZE t;
"""

WORKLOAD = f"""
[workload]
name = "readme"
repetitions = 6
warmup = 1

[setup]
sql = '''{SETUP}'''

[variants.current]
random_page_cost = "4"
[variants.proposed]
random_page_cost = "1.1"
enable_bitmapscan = "off"

[[queries]]
name = "range"
sql = "SELECT sum(v) FROM t WHERE id BETWEEN %(lo)s AND %(lo)s + 2000"
params = {{ lo = {{ range = [1, 15000] }} }}
"""


def sh_blocks() -> list[tuple[str, list[str]]]:
    """(section, command lines) of every ```sh block, comments stripped."""
    blocks = []
    section = ""
    for match in re.finditer(r"^## ([^\n]+)$|^```sh\n(.*?)^```", README.read_text(), re.M | re.S):
        if match.group(1):
            section = match.group(1).strip()
            continue
        lines = [line for line in match.group(2).splitlines() if line.strip()]
        blocks.append((section, lines))
    return blocks


def commands(only: str | None = None) -> list[list[str]]:
    """The commands of every section not SKIPPED, or of the section `only`."""
    found = []
    for section, lines in sh_blocks():
        if only is not None and section != only:
            continue
        if only is None and any(section.startswith(skipped) for skipped in SKIPPED):
            continue
        for line in lines:
            words = shlex.split(line, comments=True)
            assert words[0] == "planshift", f"{section}: not a planshift command: {line}"
            found.append(words)
    return found


def test_the_readme_has_command_blocks() -> None:
    assert len(commands()) >= 10


def uri(conninfo: str) -> str:
    """A postgresql:// URI (no spaces: it replaces the README's in a shell word)."""
    parts = psycopg.conninfo.conninfo_to_dict(conninfo)
    host = quote(str(parts["host"]), safe="")
    return f"postgresql://{parts['user']}@/{parts['dbname']}?host={host}&port={parts['port']}"


def test_every_readme_command_runs_as_written(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    (tmp_path / "workload.toml").write_text(WORKLOAD)
    dsn = fresh_db(pg15)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in filter(str.strip, SETUP.split(";")):
            conn.execute(statement)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    for words in commands():
        argv = [str(PLANSHIFT), *(w.replace(README_DSN, uri(dsn)) for w in words[1:])]
        result = subprocess.run(
            argv, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env
        )
        allowed = (0, 1) if words[1] == "compare" else (0,)
        shown = shlex.join(words)
        assert result.returncode in allowed, f"{shown}\n{result.stdout}\n{result.stderr}"
        assert "Traceback" not in result.stderr, shown
    assert (tmp_path / "planshift.lock").exists() and (tmp_path / "report.json").exists()


def test_the_upgrade_example_runs_as_written(pg14: EmbeddedCluster, tmp_path: Path) -> None:
    """The headline example on a PostgreSQL 14 source (tests/capture_sources.py): capture,
    replay on 14 and 17, the comparison and its HTML report."""
    found = commands(UPGRADE)
    assert [words[1] for words in found] == ["capture", "run", "compare", "compare"]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    with upgrade_source(pg14, tmp_path) as dsn:
        mapped = {UPGRADE_DSN: uri(dsn), UPGRADE_LOG: str(pg14.log_path)}
        for words in found:
            argv = [str(PLANSHIFT), *(mapped.get(w, w) for w in words[1:])]
            result = subprocess.run(
                argv, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env
            )
            shown = shlex.join(words)
            assert result.returncode in ((0, 1) if words[1] == "compare" else (0,)), (
                f"{shown}\n{result.stdout}\n{result.stderr}"
            )
            assert "Traceback" not in result.stderr, shown
    assert "3 of 3 top statements captured" in (tmp_path / "cap" / "coverage.txt").read_text()
    assert (tmp_path / "upgrade.html").stat().st_size > 10_000


@pytest.mark.parametrize("section", sorted(SKIPPED))
def test_skipped_sections_exist(section: str) -> None:
    assert any(s.startswith(section) for s, _ in sh_blocks()), f"no sh block in {section}"
