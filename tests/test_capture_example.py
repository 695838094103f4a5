"""examples/upgrade-check runs as its README says: pgbench drives PostgreSQL 15, capture reads
it, and a plan-only replay on 15 and 18 finds the plan changes the README shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.servers.installations import find_installation
from detector.errors import PlanshiftError

pytestmark = pytest.mark.pg
ROOT = Path(__file__).resolve().parents[1]
PLANSHIFT = Path(sys.executable).parent / "planshift"


def test_the_upgrade_check_example(tmp_path: Path) -> None:
    for major in (15, 18):
        try:
            find_installation(major)
        except PlanshiftError as exc:
            pytest.skip(f"PostgreSQL {major} is not available: {exc}")
    source = ROOT / "examples" / "upgrade-check" / "source.py"
    captured = subprocess.run(
        [sys.executable, str(source), "upgrade-check"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert captured.returncode == 0, captured.stderr
    assert re.search(r"pgbench_accounts_[0-9a-f]{6} +8500 calls", captured.stdout)
    assert "generic plan" in captured.stdout and "write      UPDATE" in captured.stdout
    workload = tmp_path / "upgrade-check" / "workload.toml"
    run = [str(PLANSHIFT), "run", str(workload), "-t", "pg15", "-t", "pg18", "--plan-only"]
    replayed = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert replayed.returncode == 0, replayed.stderr
    compare = [str(PLANSHIFT), "compare", "-b", "pg15", "-c", "pg18"]
    wide = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # one finding, one line
    shown = subprocess.run(
        compare, cwd=tmp_path, capture_output=True, text=True, check=False, env=wide
    )
    assert shown.returncode == 0, shown.stderr
    flips = [line for line in shown.stdout.splitlines() if "plan-shape-changed" in line]
    assert len(flips) == 2, shown.stdout
    assert any("BitmapOr" in line and "-> IndexScan(pgbench_accounts" in line for line in flips), (
        flips
    )
    assert any("SubPlan 1" in line and "-> Aggregate > NestedLoop" in line for line in flips), flips
    assert "production: 3000 calls" in shown.stdout
    # the generic plan on 15 is asked for with plan_cache_mode: not a difference of the sides
    assert "plan_cache_mode" not in shown.stdout
