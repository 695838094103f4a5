"""The CI recipes as written (examples/ci/github-actions.yml, gitlab-ci.yml): the GitHub
workflow's `run:` steps are taken out of the YAML and run in order, as the runner would run
them, in a pull request's checkout, with planshift installed the way the recipe installs it:
from a git URL, here a fresh clone of this repository (planshift is not on PyPI). `uses:`
steps are what the runner provides (the checkout, Python on PATH, an empty cache); the comment
step runs against a stand-in `gh` that records what it was asked to post."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / "examples" / "ci"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


# -- the subset of YAML the recipes use: mappings, lists of mappings, scalars, `|` blocks ----


def _scalar(text: str) -> str:
    text = text.strip()
    if text[:1] in ("'", '"'):
        return text[1 : text.index(text[0], 1)]  # a quoted value; a comment may follow
    return re.sub(r"\s+#.*$", "", text)


def _literal(block: list[str]) -> str:
    cut = min(_indent(line) for line in block)
    return "\n".join(line[cut:] for line in block) + "\n"


def parse_yaml(text: str) -> Any:
    lines = [
        line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    value, rest = _block(lines, 0, 0)
    assert not rest, rest[:3]
    return value


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block(lines: list[str], start: int, indent: int) -> tuple[Any, list[str]]:
    if lines[start].lstrip().startswith("- "):
        items: list[Any] = []
        position = start
        while (
            position < len(lines)
            and _indent(lines[position]) == indent
            and lines[position].lstrip().startswith("- ")
        ):
            first = " " * (indent + 2) + lines[position].lstrip()[2:]
            body = [first]
            position += 1
            while position < len(lines) and _indent(lines[position]) > indent:
                body.append(lines[position])
                position += 1
            if first.strip() in ("|", "|-"):
                items.append(_literal(body[1:]))
                continue
            value, rest = (
                _block(body, 0, indent + 2)
                if ": " in first or first.endswith(":")
                else (_scalar(first), [])
            )
            assert not rest
            items.append(value)
        return items, lines[position:]
    mapping: dict[str, Any] = {}
    position = start
    while position < len(lines) and _indent(lines[position]) == indent:
        key, _, value = lines[position].strip().partition(":")
        position += 1
        depth = _indent(lines[position]) if position < len(lines) else 0
        if value.strip() in ("|", "|-"):
            block = []
            while position < len(lines) and _indent(lines[position]) > indent:
                block.append(lines[position])
                position += 1
            mapping[key] = _literal(block)
        elif value.strip():
            mapping[key] = _scalar(value)
        elif depth > indent:
            end = position
            while end < len(lines) and _indent(lines[end]) > indent:
                end += 1
            mapping[key], rest = _block(lines[position:end], 0, depth)
            assert not rest
            position = end
        else:
            mapping[key] = None
    return mapping, lines[position:]


# -- the runner: expressions, `if:` conditions, GITHUB_ENV / GITHUB_OUTPUT / GITHUB_PATH ------


def substitute(text: str, context: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        assert match.group(1) in context, f"the test does not know ${{{{ {match.group(1)} }}}}"
        return context[match.group(1)]

    return EXPRESSION.sub(value, text)


def condition(text: str, context: dict[str, str], workspace: Path) -> bool:
    """The `if:` expressions the workflow uses: always(), hashFiles(...) != '', a == b."""
    result = True
    for term in (t.strip() for t in text.split("&&")):
        if term == "always()":
            continue
        found = re.fullmatch(r"hashFiles\('([^']+)'\) != ''", term)
        if found:
            result = result and (workspace / found.group(1)).exists()
            continue
        left, operator, right = re.fullmatch(r"(\S+) (==|!=) (\S+)", term).groups()  # type: ignore[union-attr]
        a, b = (
            side.strip("'") if side.startswith("'") else context[side] for side in (left, right)
        )
        result = result and ((a == b) if operator == "==" else (a != b))
    return result


def _read_env_file(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def git(where: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", *args],
        cwd=where, check=True, capture_output=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def planshift_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout of planshift")
    clone = tmp_path_factory.mktemp("source") / "planshift"
    git(ROOT.parent, "clone", "--quiet", str(ROOT), str(clone))
    return clone


def pull_request(tmp_path: Path, clone: Path) -> Path:
    """A repository as the recipe expects it (db/postgresql.conf, planshift/workload.toml,
    ci/ with the gate scripts of the fresh clone), pushed to `origin`, and a pull request's
    checkout that lowers random_page_cost."""
    origin, seed, workspace = tmp_path / "origin.git", tmp_path / "seed", tmp_path / "workspace"
    for folder in ("db", "planshift", "ci", ".github/workflows"):
        (seed / folder).mkdir(parents=True)
    sample = clone / "examples" / "ci"
    shutil.copy(sample / "sample" / "postgresql.conf", seed / "db" / "postgresql.conf")
    shutil.copy(sample / "sample" / "workload.toml", seed / "planshift" / "workload.toml")
    shutil.copy(sample / "gate.sh", seed / "ci" / "planshift-gate.sh")
    shutil.copy(sample / "conf_gate.py", seed / "ci" / "conf_gate.py")
    shutil.copy(sample / "github-actions.yml", seed / ".github" / "workflows" / "planshift.yml")
    git(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(origin))
    git(seed, "init", "--quiet", "-b", "main")
    git(seed, "add", ".")
    git(seed, "commit", "--quiet", "-m", "base")
    git(seed, "push", "--quiet", str(origin), "main")
    git(tmp_path, "clone", "--quiet", str(origin), str(workspace))
    git(workspace, "checkout", "--quiet", "-b", "lower-random-page-cost")
    conf = workspace / "db" / "postgresql.conf"
    conf.write_text(conf.read_text().replace("random_page_cost = 4 ", "random_page_cost = 1.1 "))
    git(workspace, "commit", "--quiet", "-am", "random_page_cost 1.1: we run on SSDs")
    return workspace


GH = """#!/bin/sh
# stands in for the GitHub CLI: records each call; no comment exists yet
echo "$*" >> "$GH_LOG"
case "$1 $2" in
  "pr comment") shift 3; [ "$1" = --body-file ] && cp "$2" "$GH_LOG.body" ;;
esac
"""


@pytest.fixture
def runner_home() -> Iterator[Path]:
    """Where the runner works: a directory others may read, as a CI runner's home is (the
    embedded PostgreSQL runs as another user when the tests run as root, and must read the
    server binaries in the recipe's virtualenv; pytest's tmp_path is private to root)."""
    home = Path(tempfile.mkdtemp(prefix="planshift-ci-runner-"))
    home.chmod(0o755)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.pg
def test_the_github_workflow_runs_from_a_fresh_clone(
    runner_home: Path, planshift_clone: Path
) -> None:
    tmp_path = runner_home
    workspace = pull_request(tmp_path, planshift_clone)
    workflow = parse_yaml((workspace / ".github" / "workflows" / "planshift.yml").read_text())
    (job,) = workflow["jobs"].values()
    tools = tmp_path / "tools"  # what setup-python and the runner image provide
    tools.mkdir()
    (tools / "python").symlink_to(sys.executable)
    (tools / "gh").write_text(GH)
    (tools / "gh").chmod(0o755)
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    github_env, github_path = tmp_path / "github-env", tmp_path / "github-path"
    github_env.touch()
    github_path.touch()
    context = {
        "github.base_ref": "main",
        "github.workspace": str(workspace),
        "github.repository": "acme/db",
        "github.token": "not-a-token",
        "github.event.pull_request.number": "7",
        "github.event.pull_request.head.repo.full_name": "acme/db",
        "runner.os": "Linux",
        "steps.python.outputs.python-version": f"{sys.version_info.major}.{sys.version_info.minor}",
    }
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "PLANSHIFT", "VIRTUAL_ENV"))
    }
    env.update(
        GITHUB_ACTIONS="true", GITHUB_REPOSITORY="acme/db", GITHUB_WORKSPACE=str(workspace),
        GITHUB_ENV=str(github_env), GITHUB_PATH=str(github_path), RUNNER_TEMP=str(runner_temp),
        GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"), GH_LOG=str(tmp_path / "gh.log"),
        PATH=f"{tools}:{env['PATH']}",
    )  # fmt: skip
    env.update({k: substitute(str(v), context) for k, v in job["env"].items()})
    assert env["PLANSHIFT_SOURCE"].startswith("git+https://"), "the recipe installs from git"
    # the same install from this repository (`localhost`: older pip refuses git+file:///path)
    env["PLANSHIFT_SOURCE"] = f"git+file://localhost{planshift_clone}"
    ran: dict[str, subprocess.CompletedProcess[str]] = {}
    for step in job["steps"]:
        name = step.get("name") or step["uses"]
        if "if" in step and not condition(step["if"], context, workspace):
            continue
        if "uses" in step:
            action = step["uses"].split("@")[0]
            assert action in {"actions/checkout", "actions/setup-python", "actions/cache",
                              "actions/upload-artifact"}, action  # fmt: skip
            if action == "actions/upload-artifact":
                for path in step["with"]["path"].split():
                    assert (workspace / path).is_file(), path
            continue
        output = tmp_path / f"output-{len(ran)}"
        output.touch()
        step_env = {**env, **_read_env_file(github_env), "GITHUB_OUTPUT": str(output)}
        step_env.update(
            {k: substitute(str(v), context) for k, v in (step.get("env") or {}).items()}
        )
        step_env["PATH"] = ":".join([*github_path.read_text().split(), step_env["PATH"]])
        done = subprocess.run(
            ["bash", "-e", "-c", substitute(step["run"], context)], cwd=workspace, env=step_env,
            capture_output=True, text=True, timeout=1200,
        )  # fmt: skip
        ran[name] = done
        for key, value in _read_env_file(output).items():
            context[f"steps.{step.get('id')}.outputs.{key}"] = value
        if name != "Fail on regressions":
            assert done.returncode == 0, f"{name}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"

    installed = ran["Install planshift from its repository (not on PyPI)"]
    assert installed.stdout.endswith("planshift 0.1.0\n") or "\nplanshift " in installed.stdout
    venv = Path(env["PLANSHIFT_VENV"]).resolve()
    # the server it starts is inside the virtualenv the recipe caches
    server = re.search(r"^pg17 (\S+) (\S+)$", installed.stdout, re.M)
    assert server and Path(server.group(2)).is_relative_to(venv), installed.stdout
    (direct,) = venv.glob("lib/python*/site-packages/planshift-*.dist-info/direct_url.json")
    origin = json.loads(direct.read_text())
    assert (
        origin["url"] == f"file://localhost{planshift_clone}" and origin["vcs_info"]["vcs"] == "git"
    )
    assert "random_page_cost 4 -> 1.1" in ran["Compare"].stdout
    assert "noise floors from A/A run" in ran["Compare"].stdout
    assert "::" in ran["Compare"].stdout  # annotations: GITHUB_ACTIONS is set
    out = workspace / "planshift-out"
    comment = (out / "comment.md").read_text()
    assert comment.startswith("<!-- planshift-report -->") and "revenue_range" in comment
    assert (tmp_path / "gh.log.body").read_text() == comment
    assert "pr comment 7 --body-file planshift-out/comment.md" in (tmp_path / "gh.log").read_text()
    status = context["steps.gate.outputs.status"]
    assert status in ("0", "1")
    assert ("Fail on regressions" in ran) == (status == "1")
    if status == "1":
        assert ran["Fail on regressions"].returncode == 1
    # a pull request from a fork: its token may not write, the comment step does not run
    (comment_step,) = [s for s in job["steps"] if s.get("name", "").startswith("Comment")]
    fork = {**context, "github.event.pull_request.head.repo.full_name": "someone/db"}
    assert not condition(comment_step["if"], fork, workspace)


def test_the_gitlab_recipe_runs_the_same_gate_steps() -> None:
    recipe = parse_yaml((CI / "gitlab-ci.yml").read_text())["planshift"]
    github = parse_yaml((CI / "github-actions.yml").read_text())
    (job,) = github["jobs"].values()
    steps = [line for line in recipe["script"] if "planshift-gate.sh" in line]
    assert [re.search(r"gate\.sh (\w+)", s).group(1) for s in steps] == [
        "measure",
        "noise",
        "compare",
    ]  # type: ignore[union-attr]
    install = next(s for s in job["steps"] if s.get("name", "").startswith("Install"))["run"]
    before = "\n".join(recipe["before_script"])
    for command in ('pip" install --quiet "planshift @ $PLANSHIFT_SOURCE"',
                    'planshift" servers add "$PLANSHIFT_POSTGRES"'):  # fmt: skip
        assert command in install and command in before
    assert recipe["variables"]["PLANSHIFT_SOURCE"] == job["env"]["PLANSHIFT_SOURCE"]
    assert recipe["artifacts"]["reports"]["junit"] == "planshift-out/junit.xml"
    # each script line is valid bash
    for line in [*recipe["before_script"], *recipe["script"]]:
        checked = subprocess.run(["bash", "-n", "-c", line], capture_output=True, text=True)
        assert checked.returncode == 0, (line, checked.stderr)
