"""examples/ci: the postgresql.conf gate, from conf parsing to a real run of gate.sh."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

from collectors.servers.installations import find_installation
from detector.errors import PlanshiftError

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / "examples" / "ci"


def load_conf_gate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("conf_gate", CI / "conf_gate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


conf_gate = load_conf_gate()
SAMPLE_CONF = (CI / "sample" / "postgresql.conf").read_text()
SAMPLE_WORKLOAD = (CI / "sample" / "workload.toml").read_text()


def test_parse_conf_handles_quotes_comments_and_repeats() -> None:
    text = """
    # a comment
    work_mem = '64MB'            # trailing comment
    search_path = '"$user", public # not a comment'
    Random_Page_Cost 1.5
    random_page_cost = 1.1       # the last one wins
    log_line_prefix = 'it''s %m '
    """
    assert conf_gate.parse_conf(text) == {
        "work_mem": "64MB",
        "search_path": '"$user", public # not a comment',
        "random_page_cost": "1.1",
        "log_line_prefix": "it's %m ",
    }


def test_session_settings_become_two_variants_on_one_server() -> None:
    old = conf_gate.parse_conf(SAMPLE_CONF)
    new = dict(old, random_page_cost="1.1", work_mem="64MB")
    workload = tomllib.loads(conf_gate.gate_workload(SAMPLE_WORKLOAD, old, new, "15"))
    assert workload["variants"] == {
        "current": {"random_page_cost": "4", "work_mem": "4MB"},
        "proposed": {"random_page_cost": "1.1", "work_mem": "64MB"},
    }
    (target,) = workload["targets"]
    assert target["postgres"] == "15"
    assert target["settings"] == {"effective_io_concurrency": "1", "shared_buffers": "16MB"}
    assert len(workload["queries"]) == 2  # the base workload is kept


def test_a_server_start_setting_starts_two_servers() -> None:
    old = conf_gate.parse_conf(SAMPLE_CONF)
    new = dict(old, shared_buffers="64MB", random_page_cost="1.1")
    workload = tomllib.loads(conf_gate.gate_workload(SAMPLE_WORKLOAD, old, new, "17"))
    assert "variants" not in workload
    current, proposed = workload["targets"]
    assert (current["name"], proposed["name"]) == ("current", "proposed")
    assert current["settings"]["shared_buffers"] == "16MB"
    assert proposed["settings"]["shared_buffers"] == "64MB"
    assert proposed["settings"]["random_page_cost"] == "1.1"
    assert "listen_addresses" not in proposed["settings"]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [({"work_mem": "4MB"}, {}, "set in one file only"),
     ({"a": "1"}, {"a": "2"}, None)],
)  # fmt: skip
def test_differing(old: dict[str, str], new: dict[str, str], message: str | None) -> None:
    if message:
        with pytest.raises(conf_gate.GateError, match=message):
            conf_gate.differing(old, new)
    else:
        assert conf_gate.differing(old, new) == {"a": ("1", "2")}
    assert conf_gate.differing({"port": "5432"}, {"port": "5433"}) == {}  # machine, not plans


def test_the_workflow_runs_the_gate_script() -> None:
    workflow = (CI / "github-actions.yml").read_text()
    assert "bash ci/planshift-gate.sh" in workflow and "<!-- planshift-report -->" in workflow
    assert "fetch-depth: 0" in workflow


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", *args],
        cwd=repo, check=True, capture_output=True,
    )  # fmt: skip


@pytest.mark.pg
def test_gate_script_fails_a_regressing_conf_change(tmp_path: Path) -> None:
    try:
        find_installation(15)
    except PlanshiftError:
        pytest.skip("PostgreSQL 15 is not installed: apt-get install postgresql-15")
    repo = tmp_path / "repo"
    (repo / "db").mkdir(parents=True)
    (repo / "planshift").mkdir()
    (repo / "db" / "postgresql.conf").write_text(SAMPLE_CONF)
    (repo / "planshift" / "workload.toml").write_text(
        SAMPLE_WORKLOAD.replace("repetitions = 20", "repetitions = 12")
    )
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    conf = repo / "db" / "postgresql.conf"
    conf.write_text(conf.read_text().replace("random_page_cost = 4 ", "random_page_cost = 1.1 "))
    planshift = tmp_path / "planshift"
    planshift.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m detector "$@"\n')
    planshift.chmod(0o755)
    env = dict(os.environ, BASE_REF="main", PLANSHIFT=str(planshift), PLANSHIFT_POSTGRES="15",
               PYTHON=sys.executable, GITHUB_ACTIONS="")  # fmt: skip
    env.pop("GITHUB_STEP_SUMMARY", None)
    result = subprocess.run(
        ["bash", str(CI / "gate.sh")], cwd=repo, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    out = repo / "planshift-out"
    assert result.returncode in (0, 1), result.stderr[-3000:]
    assert "random_page_cost 4 -> 1.1" in result.stdout
    comment = (out / "comment.md").read_text()
    assert comment.startswith("<!-- planshift-report -->")
    assert "revenue_range" in comment and "IndexScan(orders orders_pkey)" in comment
    suite = ET.parse(out / "junit.xml").getroot()
    assert suite.get("tests") == "2"
    assert json.loads((out / "report.json").read_text())["settings_diff"]["random_page_cost"] == {
        "baseline": "4", "candidate": "1.1"}  # fmt: skip
    assert (out / "report.html").stat().st_size > 20_000
    # the flip is a fact (PS100); whether it is measured slower decides exit 1 vs 0
    regressed = json.loads((out / "report.json").read_text())["summary"]["verdicts"]["regressed"]
    assert (result.returncode == 1) == (suite.get("failures") != "0")
    assert regressed == 0 or result.returncode == 1


def test_gate_script_without_a_change_exits_0(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is missing")
    repo = tmp_path / "repo"
    (repo / "db").mkdir(parents=True)
    (repo / "db" / "postgresql.conf").write_text(SAMPLE_CONF)
    (repo / "planshift").mkdir()
    (repo / "planshift" / "workload.toml").write_text(SAMPLE_WORKLOAD)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    env = dict(os.environ, BASE_REF="main", PLANSHIFT="false", PYTHON=sys.executable)
    result = subprocess.run(
        ["bash", str(CI / "gate.sh")], cwd=repo, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "nothing to measure" in (repo / "planshift-out" / "comment.md").read_text()
