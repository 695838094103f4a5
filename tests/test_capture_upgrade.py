"""The upgrade check from PostgreSQL 14, end to end on real servers: a 14 source whose
application runs extract/date/interval constants under production settings set at the server,
database and role levels, and whose DBA and planshift itself read pg_stat_statements
(tests/capture_sources.py); captured with its log and data, replayed on 14 and 17."""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from capture_sources import APPLICATION, upgrade_source
from typer.testing import CliRunner

from collectors.servers.embedded import EmbeddedCluster
from detector.cli.app import app
from detector.jobs.workload import load_workload
from detector.store import Store

pytestmark = pytest.mark.pg


@pytest.fixture(scope="module")
def source14(
    pg14: EmbeddedCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[EmbeddedCluster, str]]:
    with upgrade_source(pg14, tmp_path_factory.mktemp("source14")) as dsn:
        yield pg14, dsn


def test_a_capture_from_14_replays_on_14_and_17_with_values_and_settings(
    source14: tuple[EmbeddedCluster, str], tmp_path: Path, pg17: EmbeddedCluster
) -> None:
    cluster, dsn = source14
    out = tmp_path / "cap"
    captured = CliRunner().invoke(
        app,
        ["capture", "--target", dsn, "--log", str(cluster.log_path), "--data", "-o", str(out)],
    )
    assert captured.exit_code == 0, captured.output
    workload = load_workload(out / "workload.toml")
    # only the application: no monitoring, nothing of planshift's
    assert len(workload.queries) == len(APPLICATION)
    assert not any("pg_stat" in q.sql for q in workload.queries)
    assert "monitoring of statistics views: 2 statements" in captured.output
    assert "planshift's own statements (not production's time)" in captured.output
    assert "3 of 3 top statements captured" in captured.output
    # the constants come back with their values, in production's words
    by_text = {q.sql.split(" FROM ")[0]: q for q in workload.queries}
    extract = by_text["SELECT extract(%(p1)s"]
    assert not extract.generic_plan and [p.args for p in extract.params] == [("year",) * 5]
    dates = next(q for q in workload.queries if "+ interval" in q.sql)
    assert [p.args[0] for p in dates.params] == ["1995-01-01", "1995-01-01", "3"]
    assert "date %(p1)s" in dates.sql and "interval %(p3)s month" in dates.sql
    # production's settings, from the server, the database and the application's role
    assert dict(workload.settings) == {
        "effective_cache_size": "2GB",
        "random_page_cost": "1.1",
        "work_mem": "16MB",
    }
    assert (
        "track_io_timing = on" in workload.capture["not_carried"]
    )  # the server's, not the planner's
    # what holds production data is for its owner only
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    for name in ("workload.toml", "schema.sql", "dump.sql", "coverage.txt"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600, name
    store = tmp_path / "s.duckdb"
    run = CliRunner().invoke(
        app,
        ["run", str(out / "workload.toml"), "-t", "pg14", "-t", "pg17", "--store", str(store),
         "--repetitions", "3", "--warmup", "0"],
    )  # fmt: skip
    assert run.exit_code == 0, run.output
    with Store(store, read_only=True) as db:
        gucs = db._con.execute("SELECT name, gucs FROM targets ORDER BY name").fetchall()
        plans = db._con.execute(
            "SELECT t.name, e.plan_json FROM plan_examples e JOIN targets t USING (target_id)"
        ).fetchall()
        params = db._con.execute("SELECT DISTINCT params FROM observations").fetchall()
    assert [name for name, _ in gucs] == ["pg14", "pg17"]
    assert all(json.loads(g)["work_mem"] == "16MB" for _, g in gucs)
    for name, plan in plans:  # EXPLAIN (SETTINGS): what the planner ran with, on both sides
        settings = json.loads(plan)[0]["Settings"]
        assert settings["work_mem"] == "16MB" and settings["random_page_cost"] == "1.1", name
    assert {"p1": "year"} in [json.loads(p) for (p,) in params]
    compared = CliRunner().invoke(
        app, ["compare", "--store", str(store), "-b", "pg14", "-c", "pg17"]
    )
    assert compared.exit_code in (0, 1), compared.output
    assert "production (planshift capture): 3 of 3 top statements captured" in compared.output
    assert "runs settings production does not" not in compared.output


def test_a_side_that_departs_from_production_is_named(
    source14: tuple[EmbeddedCluster, str], tmp_path: Path
) -> None:
    """A variant that overrides production's work_mem, a plan-only replay on 14 alone."""
    _, dsn = source14
    out = tmp_path / "cap"
    captured = CliRunner().invoke(app, ["capture", "--target", dsn, "-o", str(out), "--data"])
    assert captured.exit_code == 0, captured.output
    text = (out / "workload.toml").read_text()
    (out / "workload.toml").write_text(
        text + '\n[variants.production]\n[variants.small]\nwork_mem = "1MB"\n'
    )
    store = tmp_path / "s.duckdb"
    run = CliRunner().invoke(
        app,
        ["run", str(out / "workload.toml"), "-t", "pg14", "--plan-only", "--store", str(store)],
    )
    assert run.exit_code == 0, run.output
    compared = CliRunner().invoke(
        app, ["compare", "--store", str(store), "-b", "production", "-c", "small"]
    )
    assert "small runs settings production does not: work_mem 1MB (production 16MB)" in (
        compared.output
    )
    markdown = tmp_path / "r.md"  # the pull-request comment says it too
    CliRunner().invoke(app, ["compare", "--store", str(store), "-b", "production", "-c", "small",
                             "-o", f"markdown:{markdown}"])  # fmt: skip
    assert "_small runs settings production does not: work_mem 1MB (production 16MB)._" in (
        markdown.read_text()
    )


def test_without_logs_the_typed_constants_replay_as_generic_plans(
    source14: tuple[EmbeddedCluster, str], tmp_path: Path, pg17: EmbeddedCluster
) -> None:
    """No log, no values: `extract($1 FROM ...)`, `date $1`, `interval $2 month` are written as
    the casts the server parses, and their generic plans come from 14 and 17 alike."""
    _, dsn = source14
    out = tmp_path / "cap"
    captured = CliRunner().invoke(app, ["capture", "--target", dsn, "-o", str(out), "--data"])
    assert captured.exit_code == 0, captured.output
    workload = load_workload(out / "workload.toml")
    assert len(workload.queries) == len(APPLICATION)
    assert all(q.generic_plan for q in workload.queries)
    sql = " ".join(q.sql for q in workload.queries)
    assert "pg_catalog.extract($1::text, o_orderdate)" in sql
    assert "CAST($1 AS date)" in sql and "CAST($3 AS interval month)" in sql
    captured_share = re.search(r"captured, ([\d.]+)% of production time", captured.output)
    plans_only = re.search(r"compared by plan only \(.*\) \(([\d.]+)%\)", captured.output)
    assert captured_share and plans_only and plans_only[1] == captured_share[1]
    store = tmp_path / "s.duckdb"
    run = CliRunner().invoke(
        app,
        ["run", str(out / "workload.toml"), "-t", "pg14", "-t", "pg17", "--store", str(store)],
    )
    assert run.exit_code == 0, run.output
    with Store(store, read_only=True) as db:
        planned = db._con.execute(
            "SELECT t.name, count(DISTINCT o.query_key) FROM observations o "
            "JOIN targets t USING (target_id) GROUP BY 1 ORDER BY 1"
        ).fetchall()
    assert planned == [("pg14", 3), ("pg17", 3)]


def test_exclude_leaves_statements_out_and_says_how_much(
    source14: tuple[EmbeddedCluster, str], tmp_path: Path
) -> None:
    _, dsn = source14
    out = tmp_path / "cap"
    captured = CliRunner().invoke(
        app, ["capture", "--target", dsn, "-o", str(out), "--exclude", "GROUP BY O_CUSTKEY"]
    )
    assert captured.exit_code == 0, captured.output
    workload = load_workload(out / "workload.toml")
    assert len(workload.queries) == 2 and not any("o_custkey" in q.sql for q in workload.queries)
    excluded = next(line for line in captured.output.splitlines() if "--exclude" in line)
    assert "--exclude 'GROUP BY O_CUSTKEY': 1 statement" in excluded
    share = float(excluded.split("%")[0])
    assert 1.0 < share < 99.0  # the query's share of production time, not a placeholder
    assert "2 of 2 top statements captured" in captured.output
    bad = CliRunner().invoke(app, ["capture", "--target", dsn, "-o", str(out), "--exclude", "("])
    assert bad.exit_code == 2 and "not a regular expression" in bad.output
