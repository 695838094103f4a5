"""`planshift setup-check` against real servers: a default cluster, then one set up as advised."""

from __future__ import annotations

import psycopg
import pytest
from helpers import FreshDb
from typer.testing import CliRunner

from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.installations import find_installation
from collectors.setup_check import check_server, config_snippet
from detector.cli.app import app
from detector.errors import PlanshiftError

pytestmark = pytest.mark.pg


@pytest.mark.parametrize("major", [14, 16, 17])
def test_a_default_cluster_gets_advice(
    major: int, fresh_db: FreshDb, request: pytest.FixtureRequest
) -> None:
    cluster: EmbeddedCluster = request.getfixturevalue(f"pg{major}")
    with psycopg.connect(fresh_db(cluster), autocommit=True) as conn:
        version, checks = check_server(conn)
    assert version // 10000 == major
    status = {c.setting: c.status for c in checks}
    # bind parameters are logged from 16 on (log_parameter_max_length*)
    assert any(s.endswith("parameter_max_length") for s in status) == (major >= 16)
    assert status["shared_preload_libraries"] == "ok"
    assert status["auto_explain.log_min_duration"] == "change"  # -1: nothing logged
    assert status["log_line_prefix"] == "change"  # no %Q
    assert status["CREATE EXTENSION pg_stat_statements"] == "missing"
    snippet = config_snippet(checks)
    assert "auto_explain.log_format = 'json'" in snippet
    assert "log_line_prefix = '%m [%p] %q%u@%d qid=%Q '" in snippet
    assert all(c.why for c in checks)
    assert any("30% TPS" in c.why for c in checks) and any("~5%" in c.why for c in checks)


def test_a_cluster_set_up_as_advised_is_ready() -> None:
    try:
        installation = find_installation(15)
    except PlanshiftError:
        pytest.skip("PostgreSQL 15 is not installed")
    with (
        EmbeddedCluster(installation, name="setup-check") as probe,
        psycopg.connect(probe.conninfo, autocommit=True) as conn,
    ):
        _, checks = check_server(conn)
    advised = {
        line.split(" = ")[0]: line.split(" = ", 1)[1].strip("'")
        for line in config_snippet(checks).splitlines()
    }
    advised["pg_stat_statements.max"] = "10000"
    with EmbeddedCluster(installation, settings=advised, name="setup-ready") as ready:
        with psycopg.connect(ready.conninfo, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        result = CliRunner().invoke(app, ["setup-check", "--target", ready.conninfo])
        with psycopg.connect(ready.conninfo, autocommit=True) as conn:
            _, after = check_server(conn)
    assert [c.setting for c in after if not c.ok] == []
    assert result.exit_code == 0, result.output  # ready
    assert "ready:" in result.output


def test_setup_check_json_and_exit_status(pg17: EmbeddedCluster, fresh_db: FreshDb) -> None:
    """A default cluster is not ready: exit 1 (the check found settings to change, as compare
    exits 1 on findings), in the terminal and as JSON, which says what the table says."""
    import json
    from pathlib import Path

    import jsonschema

    dsn = fresh_db(pg17)
    shown = CliRunner().invoke(app, ["setup-check", "--target", dsn])
    assert shown.exit_code == 1, shown.output
    assert "recommended postgresql.conf lines" in shown.output
    done = CliRunner().invoke(app, ["setup-check", "--target", dsn, "--format", "json"])
    assert done.exit_code == 1, done.output
    document = json.loads(done.stdout)
    schema = (
        Path(__file__).resolve().parents[1] / "detector/reports/schema/setup-check-v1.schema.json"
    )
    jsonschema.Draft202012Validator(json.loads(schema.read_text())).validate(document)
    assert document["ready"] is False and document["server_version_num"] // 10000 == 17
    status = {c["setting"]: c["status"] for c in document["checks"]}
    assert status["auto_explain.log_min_duration"] == "change"
    assert "auto_explain.log_format = 'json'" in document["config_lines"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        _, checks = check_server(conn)
    assert [c["setting"] for c in document["checks"]] == [c.setting for c in checks]


def test_setup_check_needs_a_reachable_server() -> None:
    result = CliRunner().invoke(app, ["setup-check", "--target", "host=/nonexistent dbname=x"])
    assert result.exit_code == 2 and "cannot connect" in result.output
