"""Regenerate (or check) the outputs the README shows, as sqlite-utils does with cog.

A ```text block preceded by one of these comments is output, not prose:

    <!-- output of the block above ... -->        the ```python block before it, run
    <!-- output of: planshift ARGS... -->          that command, run in the repository

In a command, `@events` stands for a store made from committed fixtures (FIXTURE_STORES): a
real server log ingested and the pg_stat_statements snapshots taken during it, built once per
run in a temporary directory.

`python scripts/readme_outputs.py` rewrites README.md; `--check` exits 1 when it differs
(tests/test_readme_outputs.py runs the check in `make test`).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MARKED = re.compile(
    r"(?P<head><!-- output of(?:: (?P<command>[^>]*?) -->| the block above[^>]*-->)\n"
    r"```text\n)(?P<body>.*?)(?P<tail>^```)",
    re.M | re.S,
)
PYTHON_BLOCK = re.compile(r"```python\n(.*?)^```", re.M | re.S)
# a real PostgreSQL 17 log where ALTER SYSTEM SET random_page_cost and a reload flip a query,
# and pg_stat_statements read before, between and after (capture_events.py): log, source, pgss
EVENTS = "tests/fixtures/logs/events"
FIXTURE_STORES = {"@events": (f"{EVENTS}/pg.log", "pg17", f"{EVENTS}/pgss.json")}


def _environment() -> dict[str, str]:
    # fixed width and no colours: the output must not depend on the terminal running it
    return {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


def _run(argv: list[str]) -> str:
    done = subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, env=_environment(), check=False
    )
    if done.returncode not in (0, 1) or done.stderr.strip().startswith("Traceback"):
        raise SystemExit(f"readme_outputs: {shlex.join(argv)} failed:\n{done.stderr}")
    return done.stdout


@cache
def fixture_store(name: str) -> str:
    log, source, snapshots = FIXTURE_STORES[name]
    directory = tempfile.mkdtemp(prefix="readme-")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    store = Path(directory) / f"{name[1:]}.duckdb"
    _run(
        [sys.executable, "-m", "detector", "ingest", log, "--store", str(store), "--source", source]
    )
    sys.path.insert(0, str(ROOT))
    from collectors.pgss import read_from_json
    from detector.jobs.snapshot import store_snapshot
    from detector.reports.consoles import discard

    quiet = discard()
    for document in json.loads((ROOT / snapshots).read_text()):
        store_snapshot(store, read_from_json(document), source, quiet)
    return str(store)


def output_of(text: str, match: re.Match[str]) -> str:
    if match.group("command"):
        words = shlex.split(match.group("command"))
        if words[0] != "planshift":
            raise SystemExit(f"readme_outputs: only planshift commands run: {words[0]}")
        words = [fixture_store(word) if word in FIXTURE_STORES else word for word in words]
        return _run([sys.executable, "-m", "detector", *words[1:]])
    blocks = list(PYTHON_BLOCK.finditer(text, 0, match.start()))
    if not blocks:
        raise SystemExit("readme_outputs: an 'output of the block above' has no ```python above")
    return _run([sys.executable, "-c", blocks[-1].group(1)])


def refreshed(text: str) -> str:
    pieces: list[str] = []
    position = 0
    for match in MARKED.finditer(text):
        output = output_of(text, match)
        # tables pad their last column: no trailing blanks in the README
        body = "\n".join(line.rstrip() for line in output.rstrip("\n").splitlines())
        pieces += [text[position : match.start("body")], body + "\n"]
        position = match.start("tail")
    return "".join(pieces) + text[position:]


def main() -> int:
    current = README.read_text()
    fresh = refreshed(current)
    if "--check" in sys.argv[1:]:
        if fresh != current:
            print(
                "README outputs are stale: run `make readme` and review the diff", file=sys.stderr
            )
            return 1
        return 0
    README.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
