"""End to end across major versions: one workload on PostgreSQL 15 and 18 (and 17 when installed),
through the CLI, on small sysbench-shaped data (the range=8000 case of seed 003, scaled down).

The table (50k rows, a quarter of them updated after loading, statistics from the whole table)
makes every version switch from Index Scan to Bitmap Heap Scan between N=400 and N=3000.
Checked: the census has every target x sweep point; the switch points are reported (census and
compare); the versions ran on the same data; and an A/A comparison of one version with itself
(`planshift noise`: one server, the same settings twice, interleaved) reports no plan change and
no regression.

The A/A is a `noise` run (one server, one variant twice, interleaved): the same check a user
runs to calibrate noise floors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import INSTALL_HOW

from collectors.servers.installations import find_installation
from detector.errors import PlanshiftError

REPO = Path(__file__).resolve().parent.parent
POINTS = ("N=100", "N=400", "N=3000")
REPETITIONS = 30

WORKLOAD = """
[workload]
name = "versions-e2e"
repetitions = 30
warmup = 2
seed = 3

[setup]
sql = '''
SET synchronize_seqscans = off;
SET max_parallel_maintenance_workers = 0;
SELECT setseed(0.5);
DROP TABLE IF EXISTS sbtest1;
CREATE TABLE sbtest1 (
    id serial PRIMARY KEY,
    k int NOT NULL DEFAULT 0,
    c char(120) NOT NULL DEFAULT '',
    pad char(60) NOT NULL DEFAULT ''
) WITH (autovacuum_enabled = off);
INSERT INTO sbtest1 (k, c, pad)
SELECT (random() * 50000)::int, md5(i::text), md5((i + 2)::text) FROM generate_series(1, 50000) AS i;
UPDATE sbtest1 SET c = md5(c) WHERE random() < 0.25;
ALTER TABLE sbtest1 ALTER COLUMN id SET STATISTICS 10000;
VACUUM (ANALYZE) sbtest1;
'''

[[queries]]
name = "sum_range"
sql = "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN %(start)s AND %(start)s + %(N)s - 1"
params = { start = { range = [1, 47000] } }
sweep = { param = "N", values = [100, 400, 3000] }
"""


def _available(major: int) -> bool:
    try:
        find_installation(major)
    except PlanshiftError:
        return False
    return True


def _require(major: int) -> None:
    try:
        find_installation(major)
    except PlanshiftError as exc:
        pytest.skip(f"PostgreSQL {major} is not available ({exc}): {INSTALL_HOW[major]}")


def planshift(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "detector", *map(str, args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if check and result.returncode not in (0, 1):
        raise AssertionError(
            f"planshift {' '.join(map(str, args))} exited {result.returncode}\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
    return result


@pytest.fixture(scope="module")
def versions() -> list[str]:
    _require(15)
    _require(18)
    return ["pg15", *(["pg17"] if _available(17) else []), "pg18"]


@pytest.fixture(scope="module")
def store(versions: Sequence[str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run 1: the workload on every version, interleaved."""
    folder = tmp_path_factory.mktemp("versions")
    workload = folder / "workload.toml"
    workload.write_text(WORKLOAD)
    path = folder / "store.duckdb"
    targets = [arg for name in versions for arg in ("--target", name)]
    result = planshift("run", workload, *targets, "--store", path)
    assert result.returncode == 0, result.stderr
    return path


@pytest.fixture(scope="module")
def aa_store(versions: Sequence[str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An A/A run of the newest version: the same settings twice on one server, interleaved."""
    folder = tmp_path_factory.mktemp("aa")
    workload = folder / "workload.toml"
    workload.write_text(WORKLOAD)
    path = folder / "store.duckdb"
    result = planshift("noise", workload, "--target", versions[-1], "--store", path)
    assert result.returncode == 0, result.stderr
    return path


def compare_json(store: Path, baseline: str, candidate: str) -> dict[str, Any]:
    result = planshift(
        "compare", "-b", baseline, "-c", candidate, "--store", store,
        "--format", "json", "--noise", "off", "--fail-on", "never",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.mark.pg
def test_census_has_every_target_and_point(store: Path, versions: Sequence[str]) -> None:
    from detector.jobs.census import census_from_store

    (census,) = census_from_store(store, None, "sum_range", [])
    assert census.targets == tuple(versions)
    assert census.points == POINTS
    for target in versions:
        for point in POINTS:
            assert sum(census.counts[(target, point)].values()) == REPETITIONS, (target, point)
    text = planshift("census", "--store", store).stdout
    assert "sum_range" in text
    for target in versions:
        assert target in text
    for point in POINTS:
        assert point in text


@pytest.mark.pg
def test_every_version_switches_to_bitmap_heap_scan(store: Path, versions: Sequence[str]) -> None:
    from detector.jobs.census import census_from_store

    (census,) = census_from_store(store, None, "sum_range", [])
    switches = {s.target: s for s in census.switches()}
    assert set(switches) == set(versions)
    for target in versions:
        switch = switches[target]
        assert (switch.before, switch.after) == ("N=400", "N=3000")
        assert switch.from_signature == "Aggregate > IndexScan(sbtest1 sbtest1_pkey)"
        assert switch.to_signature == (
            "Aggregate > BitmapHeapScan(sbtest1) > BitmapIndexScan(sbtest1_pkey)"
        )
    text = planshift("census", "--store", store, "--query", "sum_range").stdout
    for target in versions:
        assert f"{target} switches between N=400 and N=3000" in text


@pytest.mark.pg
def test_version_comparison_names_the_switch_point_of_each_version(
    store: Path, versions: Sequence[str]
) -> None:
    old, new = versions[0], versions[-1]
    document = compare_json(store, old, new)
    assert document["server_version_num"]["baseline"] // 10000 == 15
    assert document["server_version_num"]["candidate"] // 10000 == 18
    assert [q["point"] for q in document["queries"]] == list(POINTS)
    switches = document["switch_points"]["sum_range"]
    assert {(s["target"], s["before"], s["after"]) for s in switches} == {
        (old, "N=400", "N=3000"),
        (new, "N=400", "N=3000"),
    }
    # both versions flip at the same point, so no point has a plan change between them
    assert not [q for q in document["queries"] if q["plan_changed"]]
    assert not [f for f in document["findings"] if f["code"] in ("PS100", "PS101")]
    # same data on both sides: rows and the primary key's correlation as planshift recorded them
    table = document["tables"]["sbtest1"]
    assert table["baseline"]["rows"] == table["candidate"]["rows"] == 50000
    assert table["baseline"]["correlation"] == table["candidate"]["correlation"]
    assert 0.5 < table["baseline"]["correlation"]["id"] < 0.75
    text = planshift("compare", "-b", old, "-c", new, "--store", store, "--noise", "off").stdout
    assert f"{old} switches between N=400 and N=3000" in text
    assert f"{new} switches between N=400 and N=3000" in text


@pytest.mark.pg
def test_same_version_aa_reports_no_plan_change_and_no_regression(aa_store: Path) -> None:
    for baseline, candidate in (("aa1", "aa2"), ("aa2", "aa1")):
        document = compare_json(aa_store, baseline, candidate)
        versions = document["server_version_num"]
        assert versions["baseline"] == versions["candidate"]
        assert len(document["queries"]) == len(POINTS)
        assert not [q for q in document["queries"] if q["plan_changed"]]
        assert not [f for f in document["findings"] if f["code"] in ("PS100", "PS101")]
        verdicts = {q["point"]: q["timing"]["summary"] for q in document["queries"]}
        assert not [q for q in document["queries"] if q["timing"]["verdict"] == "regressed"], (
            verdicts
        )
