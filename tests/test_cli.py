"""The command line as a user runs it: a subprocess, real PostgreSQL, exit codes 0/1/2."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers import FORCED_PLANS_WORKLOAD as WORKLOAD
from helpers import FreshDb, planshift

from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.installations import find_installation
from detector.cli.app import app

COMMANDS = sorted(
    [c.name or c.callback.__name__ for c in app.registered_commands if c.callback]
    + [g.name for g in app.registered_groups if g.name]
)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    result = planshift(command, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout and len(result.stdout.splitlines()) > 3


def test_no_arguments_prints_usage() -> None:
    result = planshift()
    assert "Usage:" in result.stdout + result.stderr
    assert all(c in result.stdout for c in COMMANDS)


def test_missing_store_is_a_usage_error(tmp_path: Path) -> None:
    result = planshift("compare", "-b", "a", "-c", "b", "--store", tmp_path / "none.duckdb")
    assert result.returncode == 2
    assert "error: store" in result.stderr and "hint:" in result.stderr


def test_bad_workload_is_a_usage_error_naming_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(WORKLOAD.replace("range = [1, 50000]", "range = [50000]"))
    result = planshift("run", bad, "--store", tmp_path / "s.duckdb")
    assert result.returncode == 2
    assert "error: bad.toml: queries[0].params.id.range" in result.stderr
    assert not (tmp_path / "s.duckdb").exists() or "Traceback" not in result.stderr


def test_unknown_option_exits_2() -> None:
    assert planshift("compare", "--no-such-option").returncode == 2


def test_rules_lists_the_catalog_and_documents_each_rule() -> None:
    listing = planshift("rules")
    assert listing.returncode == 0
    assert "PS101" in listing.stdout
    doc = planshift("rules", "PS101")
    assert doc.returncode == 0
    for section in ("What it flags", "Why it matters", "Example", "What to do"):
        assert section in doc.stdout
    assert "file: rules/ps101_index_to_bitmap_scan.py" in doc.stdout
    # a rule of a former family file is found by its code, in its own file
    assert "file: rules/ps402_hash_batches.py" in planshift("rules", "PS402").stdout
    unknown = planshift("rules", "PS999")
    assert unknown.returncode == 2 and "error:" in unknown.stderr


@pytest.mark.pg
def test_servers_lists_the_installations() -> None:
    result = planshift("servers")
    assert result.returncode == 0, result.stderr
    assert "pg15" in result.stdout and "builder" in result.stdout
    listed = json.loads(planshift("servers", "--format", "json").stdout)
    assert str(find_installation(15).bindir) in [s["bindir"] for s in listed["servers"]]
    add = planshift("servers", "add", "--help")
    assert add.returncode == 0 and "--wheel" in add.stdout


def test_run_then_compare_exit_codes_and_json(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    workload = tmp_path / "w.toml"
    workload.write_text(WORKLOAD)
    store = tmp_path / "s.duckdb"
    ran = planshift(
        "run", workload, "--store", store, "--setup", "--dsn", f"local={fresh_db(pg15)}"
    )
    assert ran.returncode == 0, ran.stderr
    assert "run 1 stored" in ran.stdout

    args = ("compare", "--store", store, "-b", "indexed", "-c", "seqscan")
    report = planshift(*args, "--fail-on", "never")
    assert report.returncode == 0, report.stderr
    assert "IndexScan(t t_pkey)" in report.stdout and "SeqScan(t)" in report.stdout
    assert "PS100 plan-shape-changed" in report.stdout

    # a seq scan over 50,000 rows instead of a primary-key lookup: measured slower -> error
    assert planshift(*args).returncode == 1
    assert planshift(*args, "--fail-on", "warning").returncode == 1
    # only the rules that cannot fire on a slowdown: clean
    assert planshift(*args, "--select", "PS201", "--select", "PS6").returncode == 0
    assert planshift(*args, "--select", "PS1", "--ignore", "plan-flip").returncode == 0

    as_json = planshift(*args, "--format", "json", "--fail-on", "never")
    document = json.loads(as_json.stdout)
    assert document["format_version"] == 1
    assert document["summary"]["verdicts"]["regressed"] == 1
    (query,) = document["queries"]
    assert query["plan_changed"] is True
    assert query["baseline"]["plans"][0]["samples"] == 8
    assert query["timing"]["ratio"] > 2
    again = planshift(*args, "--format", "json", "--fail-on", "never")
    assert again.stdout == as_json.stdout, "JSON output is deterministic"

    census = planshift("census", "--store", store, "-o", tmp_path / "census.html")
    assert census.returncode == 0, census.stderr
    assert "A = IndexScan(t t_pkey)" in census.stdout and "B = SeqScan(t)" in census.stdout
    as_json = json.loads(planshift("census", "--store", store, "-f", "json").stdout)
    (lookup,) = as_json["queries"]
    assert lookup["shapes"] == {"A": "IndexScan(t t_pkey)", "B": "SeqScan(t)"}
    assert {(s["target"], tuple(s["shapes"].items())) for s in lookup["samples"]} == {
        ("indexed", (("A", 8),)),
        ("seqscan", (("B", 8),)),
    }
    page = (tmp_path / "census.html").read_text()
    assert (
        "<svg" in page
        and "lookup" in page
        and not re.search(r"https?://", page.split("</head>")[0])
    )

    wrong = planshift("compare", "--store", store, "-b", "nosuch", "-c", "seqscan")
    assert wrong.returncode == 2 and "matches no target" in wrong.stderr
    assert "indexed, seqscan" in wrong.stderr


@pytest.mark.pg
@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["ctrl-c", "sigterm", "sighup"]
)
def test_interrupting_a_run_stops_its_clusters(tmp_path: Path, signum: int) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "detector", "demo", "--store", str(tmp_path / "s.duckdb")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a suite started in the background (`make test &`) ignores SIGINT, and so would the
        # demo it starts: a terminal's Ctrl-C is what is tested
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stderr is not None
    line = process.stderr.readline()  # printed once the cluster is up
    assert line.startswith("running demo-range-scans"), line
    # the first progress line of the measurements: the run is under way
    while (line := process.stderr.readline()) and not line.startswith("point_select "):
        pass
    assert line, "the demo ended before measuring"
    clusters = Path(tempfile.gettempdir()) / "planshift-clusters"
    owned = [
        d
        for d in clusters.iterdir()
        if (d / "owner.pid").is_file() and (d / "owner.pid").read_text().strip() == str(process.pid)
    ]
    assert owned, "the run's cluster exists while it runs"
    process.send_signal(signum)
    _, rest = process.communicate(timeout=120)
    assert process.returncode == 128 + signum
    if signum == signal.SIGINT:
        assert "interrupted: embedded clusters stopped" in rest
    assert not any(d.exists() for d in owned), "cluster directory removed"
    ran = planshift("runs", "--store", tmp_path / "s.duckdb")
    assert "running" not in ran.stdout and "complete" not in ran.stdout, "no run left half-done"


def test_error_messages_are_not_read_as_markup() -> None:
    result = planshift("rules", "PS[bold]1")
    assert result.returncode == 2
    assert "PS[bold]1" in result.stderr


def test_markup_characters_in_names_are_printed_as_they_are(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    workload = tmp_path / "w.toml"
    workload.write_text(
        WORKLOAD.replace('name = "cli-test"', 'name = "[/]x [bold]w"').replace(
            'name = "lookup"', 'name = "[/]look[red]up"'
        )
    )
    store = tmp_path / "[/]s.duckdb"
    dsn = f"local={fresh_db(pg15)}"
    ran = planshift("run", workload, "--store", store, "--setup", "--dsn", dsn, "--label", "[/]l")
    assert ran.returncode == 0, ran.stderr
    assert "running [/]x [bold]w" in ran.stderr and "[/]s.duckdb" in ran.stdout
    runs = planshift("runs", "--store", store)
    assert runs.returncode == 0, runs.stderr
    assert "[/]l" in runs.stdout
    for command in (("census",), ("compare", "-b", "indexed", "-c", "seqscan", "-v")):
        shown = planshift(*command, "--store", store)
        assert shown.returncode in (0, 1), shown.stderr
        assert "Traceback" not in shown.stderr


def test_setup_check_without_the_privilege_to_read_settings(pg15: EmbeddedCluster) -> None:
    import psycopg
    from psycopg import sql

    role = f"planshift_nopriv_{time.monotonic_ns()}"
    with psycopg.connect(pg15.conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        result = subprocess.run(
            [sys.executable, "-m", "detector", "setup-check", "-t",
             psycopg.conninfo.make_conninfo(pg15.conninfo, user=role)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "400"},
        )  # fmt: skip
    finally:
        with psycopg.connect(pg15.conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
    assert result.returncode == 1, result.stderr  # not ready: settings to change or to read
    assert "Traceback" not in result.stderr
    assert "unreadable by this role: grant it pg_read_all_settings" in result.stdout
    assert "# could not read it; shared_preload_libraries = " in result.stdout
    assert "track_io_timing" in result.stdout  # the readable settings are still checked


def test_a_killed_run_is_marked_failed_by_the_next_command(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    workload = tmp_path / "w.toml"
    workload.write_text(WORKLOAD.replace("repetitions = 8", "repetitions = 5000"))
    store = tmp_path / "s.duckdb"
    process = subprocess.Popen(
        [sys.executable, "-m", "detector", "run", str(workload), "--store", str(store),
         "--setup", "--dsn", f"local={fresh_db(pg15)}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert process.stderr is not None
    line = process.stderr.readline()  # printed once the store and the server are open
    assert line.startswith("running cli-test"), line
    # the first progress line of the measurements: the run row exists
    while (line := process.stderr.readline()) and not re.search(r" \d+/\d+ ", line):
        pass
    assert line, "the run ended before measuring"
    process.kill()
    process.wait(timeout=60)
    listed = planshift("runs", "--store", store)
    assert listed.returncode == 0, listed.stderr
    assert "running" not in listed.stdout and "failed" in listed.stdout
    assert f"process {process.pid} on " in listed.stdout and "gone" in listed.stdout
    again = planshift("runs", "--store", store)
    assert again.stdout == listed.stdout


def test_version_short_help_and_completion() -> None:
    from detector import __version__

    assert planshift("--version").stdout.strip() == f"planshift {__version__}"
    top = planshift("-h")
    assert top.returncode == 0 and "--install-completion" in top.stdout
    assert "--show-completion" in top.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_short_help_and_flags_shown_as_flags(command: str) -> None:
    result = planshift(command, "-h")
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout
    assert "<bool>" not in result.stdout and "--no-" not in result.stdout


def test_no_color_and_piped_errors_are_plain() -> None:
    for env in ({"NO_COLOR": "1", "FORCE_COLOR": ""}, {}):
        result = subprocess.run(
            [sys.executable, "-m", "detector", "rules", "PS999"],
            capture_output=True, text=True, timeout=60, env={**os.environ, **env},
        )  # fmt: skip
        assert result.returncode == 2
        assert result.stderr.startswith("error: unknown rule 'PS999'\nhint: ")
        assert "\x1b[" not in result.stderr


@pytest.mark.pg
def test_piped_tables_are_not_cut_or_wrapped(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    long_bin = tmp_path / ("x" * 120) / "bin"
    long_bin.mkdir(parents=True)
    for binary in ("pg_ctl", "initdb", "postgres", "pg_config"):
        os.symlink(find_installation(15).bindir / binary, long_bin / binary)
    result = subprocess.run(
        [sys.executable, "-m", "detector", "servers", "--pg-bin", str(long_bin)],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "…" not in result.stdout and "..." not in result.stdout
    assert "pg_stat_statements" in result.stdout
    assert any(str(long_bin) in line for line in result.stdout.splitlines())


def test_piped_run_prints_progress_lines(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    workload = tmp_path / "w.toml"
    workload.write_text(WORKLOAD.replace("repetitions = 8", "repetitions = 40"))
    ran = planshift(
        "run", workload, "-s", tmp_path / "s.duckdb", "--setup", "--dsn", f"local={fresh_db(pg15)}"
    )
    assert ran.returncode == 0, ran.stderr
    lines = ran.stderr.splitlines()
    assert lines[0].startswith("running cli-test") and lines[2].startswith("setting up local")
    assert lines[1].startswith("setup on local (") and lines[1].endswith(
        "[setup], as asked (--setup)"
    )
    progress = [line for line in lines if line.startswith("lookup ")]
    assert 5 <= len(progress) <= 12, lines
    assert re.fullmatch(r"lookup (\d+)/\1 \(100%\), 0:\d\d elapsed", progress[-1]), progress


def test_compare_names_sides_as_a_dba_types_them(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    workload = tmp_path / "w.toml"
    workload.write_text(WORKLOAD.replace("repetitions = 8", "repetitions = 5"))
    store = tmp_path / "s.duckdb"
    dsns = ("--dsn", f"a={fresh_db(pg15)}", "--dsn", f"b={fresh_db(pg15)}")
    ran = planshift("run", workload, "-s", store, "--setup", *dsns, "-t", "a", "-t", "b")
    assert ran.returncode == 0, ran.stderr

    def sides(*args: str) -> tuple[str, str, str]:
        result = planshift(
            "compare", "-s", store, "-f", "json", "--fail-on", "never", *args, cwd=tmp_path
        )
        assert result.returncode == 0, result.stderr
        document = json.loads(result.stdout)
        return document["baseline"], document["candidate"], result.stderr

    # servers x variants: a server name takes its variant from the other side
    base, cand, note = sides("-b", "a", "-c", "b")
    assert (base, cand) == ("a/indexed", "b/indexed")
    assert "a -> a/indexed, b -> b/indexed (the first variant both have" in note
    assert sides("-b", "a", "-c", "b/seqscan")[:2] == ("a/seqscan", "b/seqscan")
    assert sides("-b", "indexed", "-c", "seqscan")[:2] == ("a/indexed", "a/seqscan")
    assert sides("-b", "b/indexed", "-c", "seqscan")[:2] == ("b/indexed", "b/seqscan")
    many = planshift("compare", "-s", store)
    assert many.returncode == 2 and "run 1 has 4 sides" in many.stderr

    # one server: names are the variants, and server/variant works too
    ran = planshift("run", workload, "-s", store, *dsns[:2])
    assert ran.returncode == 0, ran.stderr
    assert sides("-b", "a/indexed", "-c", "a/seqscan")[:2] == ("indexed", "seqscan")
    base, cand, note = sides()
    assert (base, cand) == ("indexed", "seqscan") and "the two sides of run 2" in note
    assert sides("-c", "indexed")[:2] == ("seqscan", "indexed")

    # a later one-variant run: the names come from the latest run that has both
    ran = planshift("run", workload, "-s", store, *dsns[:2], "--variant", "indexed")
    assert ran.returncode == 0, ran.stderr
    base, cand, note = sides("-b", "indexed", "-c", "seqscan")
    assert (base, cand) == ("indexed", "seqscan") and "run 2, the latest with both" in note
    wrong = planshift("compare", "-s", store, "-b", "indexed", "-c", "nosuch")
    assert wrong.returncode == 2 and "NAME@RUN" in wrong.stderr

    # planshift.lock in the current directory is used without being named
    approved = planshift("approve", "-s", store, "-t", "indexed@2", cwd=tmp_path)
    assert approved.returncode == 0, approved.stderr
    gated = planshift(
        "compare", "-s", store, "-b", "indexed", "-c", "seqscan", "--select", "PS600", cwd=tmp_path
    )
    assert gated.returncode == 1, gated.stdout
    assert "approved plans: planshift.lock in the current directory" in gated.stderr
    assert "PS600" in gated.stdout
