"""The global options --debug and --quiet (through `logging`), and what the CLI says about
its outputs: --debug shows a user reading someone else's log what was read, detected and
skipped; --quiet leaves results and errors; when every report goes to a file, one line says
which; an unknown --fail-on names `never` among the choices."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import COMMITTED

EVENTS_LOG = Path(__file__).resolve().parent / "fixtures" / "logs" / "events" / "pg.log"


def planshift(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "detector", *map(str, args)], cwd=cwd, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip


def _broken_log(tmp_path: Path) -> tuple[Path, int]:
    """The real events log with one plan's JSON cut short (as a full disk leaves it): the line
    where that entry starts."""
    lines = EVENTS_LOG.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if "plan:" in line)
    del lines[start + 3 : start + 12]  # the plan's JSON loses its middle
    log = tmp_path / "someone-else.log"
    log.write_text("".join(lines))
    return log, start + 1


def test_debug_shows_what_an_ingest_read_detected_and_skipped(tmp_path: Path) -> None:
    log, broken = _broken_log(tmp_path)
    done = planshift("--debug", "ingest", log, "--store", tmp_path / "s.duckdb", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    debug = [line for line in done.stderr.splitlines() if line.startswith("debug: ")]
    assert any(f"reading {log}" in line for line in debug)
    assert any(
        f"{log}: format stderr (detected from its first lines); log_line_prefix guessed" in line
        for line in debug
    )
    (counts,) = [line for line in debug if "messages read" in line]
    assert "plans stored" in counts and "1 problems (skipped)" in counts
    (skipped,) = [line for line in debug if ": skipped: " in line]
    assert f"{log}:{broken}: skipped: " in skipped
    # without --debug: none of it
    again = planshift("ingest", log, "--store", tmp_path / "t.duckdb", cwd=tmp_path)
    assert again.returncode == 0 and "debug:" not in again.stderr


def test_quiet_keeps_results_and_errors_only(tmp_path: Path) -> None:
    store = tmp_path / "store.duckdb"
    store.write_bytes(COMMITTED.read_bytes())
    compare = ("compare", "--store", store, "-b", "current", "-c", "proposed")
    loud = planshift(*compare, "-o", tmp_path / "a.html", cwd=tmp_path)
    assert loud.returncode == 1 and loud.stdout == ""
    (line,) = loud.stderr.splitlines()  # everything went to files: one line says where
    assert line.startswith("current vs proposed: 9 queries compared") and line.endswith(
        f"wrote html {tmp_path / 'a.html'}"
    )
    quiet = planshift("--quiet", *compare, "-o", tmp_path / "b.html", cwd=tmp_path)
    assert quiet.returncode == 1 and quiet.stdout == "" and quiet.stderr == ""
    assert (tmp_path / "b.html").read_text().startswith("<!DOCTYPE html>")
    failed = planshift("--quiet", "compare", "--store", store, "-b", "nosuch", cwd=tmp_path)
    assert failed.returncode == 2 and failed.stderr.startswith("error: ")
    both = planshift("--quiet", "--debug", "runs", "--store", store, cwd=tmp_path)
    assert both.returncode == 2 and "exclude each other" in both.stderr


def test_an_unknown_fail_on_lists_never(tmp_path: Path) -> None:
    store = tmp_path / "store.duckdb"
    store.write_bytes(COMMITTED.read_bytes())
    done = planshift("compare", "--store", store, "--fail-on", "sometimes", cwd=tmp_path)
    assert done.returncode == 2
    assert "error: unknown --fail-on 'sometimes'" in done.stderr
    assert "hint: use one of: info, warning, error, never" in done.stderr
