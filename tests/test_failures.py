"""A query that fails on a target never sinks a run (real PostgreSQL 15 and 17): it is recorded
with PostgreSQL's error, the other queries are measured and compared, and `compare` reports it
(PS700); a failure that is the server's fault ends the run with error + hint and keeps it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import psycopg
import pytest
from helpers import FreshDb, planshift

from collectors.runner import RunOptions, run_workload
from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.targets import open_servers, resolve_target_specs
from detector.jobs.workload import load_workload
from detector.model import parse_plan
from detector.store import Store

pytestmark = pytest.mark.pg
SCHEMAS = Path(__file__).resolve().parent.parent / "detector" / "reports" / "schema"
SETUP = """
[setup]
sql = '''
CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO t SELECT i, i % 100 FROM generate_series(1, 20000) i;
VACUUM ANALYZE t;
'''
"""
UPGRADE = f"""
[workload]
name = "upgrade-check"
repetitions = 8
warmup = 2
{SETUP}
[[queries]]
name = "bgwriter"
sql = "SELECT buffers_backend FROM pg_stat_bgwriter"

[[queries]]
name = "range"
sql = "SELECT sum(v) FROM t WHERE id BETWEEN %(lo)s AND %(lo)s + 500"
params = {{ lo = {{ range = [1, 19000] }} }}

[[queries]]
name = "point"
sql = "SELECT v FROM t WHERE id = %(id)s"
params = {{ id = {{ range = [1, 20000] }} }}

[[queries]]
name = "by_value"
sql = "SELECT count(*) FROM t WHERE v = %(v)s"
params = {{ v = {{ range = [0, 99] }} }}
"""


def names_of(store: Store) -> dict[str, str]:
    return {key: query.name for key, query in store.queries().items()}


def test_a_query_failing_only_on_17_is_a_finding_and_the_others_are_compared(
    tmp_path: Path, pg15: EmbeddedCluster, pg17: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    """The issue's done-when: `SELECT buffers_backend FROM pg_stat_bgwriter` (gone in 17)
    first, then three queries that work on both: the run completes on 15 and 17, compare
    exits 1 on the PS700 error with PostgreSQL's text, the other three are compared."""
    (tmp_path / "w.toml").write_text(UPGRADE)
    store = tmp_path / "s.duckdb"
    dsns = ["--dsn", f"pg15={fresh_db(pg15)}", "--dsn", f"pg17={fresh_db(pg17)}"]
    ran = planshift(
        "run", tmp_path / "w.toml", "--store", store, *dsns, "-t", "pg15", "-t", "pg17", "--setup"
    )
    assert ran.returncode == 0, ran.stderr
    assert "1 query failed on a target: bgwriter on pg17" in ran.stderr
    runs = planshift("runs", "--store", store)
    assert "complete" in runs.stdout
    assert "run 1: 1 query failed on a target: bgwriter on pg17" in runs.stdout
    listed = json.loads(planshift("runs", "--store", store, "--format", "json").stdout)
    assert listed["runs"][0]["failed_queries"] == [
        {"query": "bgwriter", "point": None, "targets": ["pg17"]}
    ]
    jsonschema.Draft202012Validator(
        json.loads((SCHEMAS / "runs-v1.schema.json").read_text())
    ).validate(listed)

    outputs = ["-o", tmp_path / "r.json", "-o", tmp_path / "r.xml", "-o", tmp_path / "r.txt",
               "-o", tmp_path / "r.html", "-o", f"markdown:{tmp_path / 'r.md'}"]  # fmt: skip
    compared = planshift("compare", "--store", store, "-b", "pg15", "-c", "pg17", *outputs)
    assert compared.returncode == 1, compared.stderr  # findings at error, nothing else
    document = json.loads((tmp_path / "r.json").read_text())
    jsonschema.Draft202012Validator(
        json.loads((SCHEMAS / "report-v1.schema.json").read_text())
    ).validate(document)
    (failing,) = [f for f in document["findings"] if f["code"] == "PS700"]
    assert failing["severity"] == "error" and failing["query"] == "bgwriter"
    assert failing["message"].startswith(
        'fails on pg17: ERROR 42703 column "buffers_backend" does not exist'
    )
    assert failing["message"].endswith("works on pg15 (8 samples)")
    (error,) = failing["evidence"]["candidate"]["errors"]
    assert (error["sqlstate"], error["phase"], error["sample_index"]) == ("42703", "warmup", -2)
    assert document["summary"]["worst_severity"] == "error"
    # the three others compared as usual, and only they count in the statistics
    assert sorted(q["name"] for q in document["queries"]) == ["by_value", "point", "range"]
    assert document["summary"]["queries"] == 3 and document["summary"]["not_compared"] == 1
    assert sum(document["summary"]["verdicts"].values()) == 3
    assert any("across 3 queries" in note for note in document["method"]["notes"])
    for query in document["queries"]:
        assert query["baseline"]["timing"]["n"] == query["candidate"]["timing"]["n"] == 8
        assert query["timing"]["paired"]
    (failure,) = document["failures"]
    assert (failure["query"], failure["compared"]) == ("bgwriter", False)
    assert failure["baseline"]["measured_samples"] == 8
    assert failure["candidate"]["measured_samples"] == 0
    text = (tmp_path / "r.txt").read_text()
    assert "bgwriter  not compared  no execution worked on pg17" in text
    assert "3 queries compared" in text and "1 not compared (failed on a side)" in text
    page = (tmp_path / "r.html").read_text()  # the HTML report lists it, with the error
    assert 'id="not-compared"' in page and "<b>bgwriter</b>: no execution worked on pg17" in page
    assert "column &#34;buffers_backend&#34; does not exist" in page
    markdown = (tmp_path / "r.md").read_text()  # so does the Markdown, in the terminal's words
    (error_line,) = [x for x in text.splitlines() if x.startswith("  pg17: ")]
    assert "buffers_backend" in error_line
    assert f"- **bgwriter**: no execution worked on pg17\n  - {error_line.strip()}\n" in markdown
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "r.xml").getroot().iter("testcase")}
    assert set(cases) == {"bgwriter", "by_value", "point", "range"}
    failure_element = cases["bgwriter"].find("failure")
    assert failure_element is not None and failure_element.get("type") == "PS700"
    assert "buffers_backend" in (failure_element.get("message") or "")

    # after the failure the session went on: every sample of the others on both sides, with
    # the same parameters per sample (the pairing the statistics rely on)
    with Store(store, read_only=True) as db:
        targets = {t.target_id: t.name for t in db.targets()}
        names = names_of(db)
        samples: dict[tuple[str, str], dict[int, str]] = {}
        for row in db.observations(list(targets)):
            samples.setdefault((names[row.query_key], targets[row.target_id]), {})[
                row.sample_index
            ] = row.params
    assert ("bgwriter", "pg17") not in samples and len(samples[("bgwriter", "pg15")]) == 8
    for name in ("range", "point", "by_value"):
        assert samples[(name, "pg15")] == samples[(name, "pg17")]
        assert sorted(samples[(name, "pg15")]) == list(range(8))


SOME_VALUES = f"""
[workload]
name = "some-values"
repetitions = 8
warmup = 2
{SETUP}
[variants.loose]
work_mem = "4MB"
[variants.tight]
work_mem = "4MB"
statement_timeout = "50ms"

[[queries]]
name = "ratio"
sql = "SELECT sum(v) / %(d)s FROM t WHERE id < 1000"
params = {{ d = {{ values = [1, 0, 2, 3] }} }}

[[queries]]
name = "nap"
sql = "SELECT pg_sleep(%(s)s)"
params = {{ s = {{ values = [0, 0.3] }} }}
"""


def test_a_query_failing_for_some_parameter_values_is_measured_on_the_rest(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    """`ratio` divides by zero for one value in four on both variants; `nap` sleeps past the
    candidate's statement_timeout for one value in two: each failure is recorded, the other
    samples are measured and compared, and only the candidate's own failures are an error."""
    (tmp_path / "w.toml").write_text(SOME_VALUES)
    store = tmp_path / "s.duckdb"
    dsn = ["--dsn", f"pg15={fresh_db(pg15)}", "--setup"]
    ran = planshift("run", tmp_path / "w.toml", "--store", store, *dsn)
    assert ran.returncode == 0, ran.stderr
    assert "2 queries failed on a target: nap on tight, ratio on loose, tight" in ran.stderr
    with Store(store, read_only=True) as db:
        targets = {t.target_id: t.name for t in db.targets()}
        names = names_of(db)
        measured: dict[tuple[str, str], dict[int, dict[str, float]]] = {}
        for row in db.observations(list(targets)):
            side = (names[row.query_key], targets[row.target_id])
            measured.setdefault(side, {})[row.sample_index] = json.loads(row.params)
        failed: dict[tuple[str, str], dict[int, set[str]]] = {}
        for failure in db.query_failures():
            side = (names[failure.query_key], targets[failure.target_id])
            failed.setdefault(side, {}).setdefault(failure.sample_index, set()).add(
                f"{failure.phase} {failure.sqlstate} {failure.params}"
            )
    # ratio: every execution with d = 0 failed (warm-up, priming and measurement), on both
    for side in ("loose", "tight"):
        kinds = {kind for kinds in failed[("ratio", side)].values() for kind in kinds}
        assert kinds >= {'priming 22012 {"d": 0}', 'measurement 22012 {"d": 0}'}
        assert {k.split()[1:] == ["22012", '{"d":', "0}"] for k in kinds} == {True}
        assert all(params["d"] != 0 for params in measured[("ratio", side)].values())
        measured_failed = {i for i in failed[("ratio", side)] if i >= 0}
        assert sorted(set(measured[("ratio", side)]) | measured_failed) == list(range(8))
        assert not set(measured[("ratio", side)]) & measured_failed
    assert failed[("ratio", "loose")].keys() == failed[("ratio", "tight")].keys()
    # nap: only the tight side, only s = 0.3, cancelled by its statement_timeout
    assert ("nap", "loose") not in failed and len(measured[("nap", "loose")]) == 8
    nap_failures = {kind for kinds in failed[("nap", "tight")].values() for kind in kinds}
    assert {tuple(kind.split(" ", 2)[1:]) for kind in nap_failures} == {("57014", '{"s": 0.3}')}
    assert all(params["s"] == 0 for params in measured[("nap", "tight")].values())
    assert len(measured[("nap", "tight")]) == 4

    compared = planshift("compare", "--store", store, "-b", "loose", "-c", "tight", "-f", "json")
    assert compared.returncode == 1, compared.stderr
    document = json.loads(compared.stdout)
    queries = {q["name"]: q for q in document["queries"]}
    assert set(queries) == {"nap", "ratio"} and document["summary"]["not_compared"] == 0
    assert queries["nap"]["baseline"]["timing"]["n"] == 8
    assert queries["nap"]["candidate"]["timing"]["n"] == 4
    findings = {
        (f["query"], f["severity"]): f["message"]
        for f in document["findings"]
        if f["code"] == "PS700"
    }
    assert set(findings) == {("nap", "error"), ("ratio", "info")}
    # the warm-up sample -1 (s = 0.3) counts: a sample is a set of parameter values
    assert findings[("nap", "error")].startswith("fails on tight for 5 samples that work on loose")
    assert "ERROR 57014 canceling statement due to statement timeout" in findings[("nap", "error")]
    assert findings[("nap", "error")].endswith("4 samples measured on both sides compared")
    assert findings[("ratio", "info")].startswith("fails on both sides for 3 samples")
    assert "ERROR 22012 division by zero" in findings[("ratio", "info")]


SLEEPER = f"""
[workload]
name = "terminated"
repetitions = 3
warmup = 0
prime = false
{SETUP}
[[queries]]
name = "quick"
sql = "SELECT count(*) FROM t WHERE v = %(v)s"
params = {{ v = {{ range = [0, 99] }} }}

[[queries]]
name = "sleeper"
sql = "SELECT pg_sleep(2)"
"""


def test_a_terminated_backend_ends_the_run_with_error_and_hint_and_keeps_it(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    """pg_terminate_backend on planshift's session mid-query is the server's doing, not the
    query's: exit 2 with error + hint, no traceback, and the new store keeps the run, marked
    failed with why, and what it measured before."""
    conninfo = fresh_db(pg15)
    database = psycopg.conninfo.conninfo_to_dict(conninfo)["dbname"]
    (tmp_path / "w.toml").write_text(SLEEPER)
    store = tmp_path / "new" / "s.duckdb"
    command = ["run", tmp_path / "w.toml", "--store", store, "--dsn", f"pg15={conninfo}", "--setup"]
    process = subprocess.Popen(
        [sys.executable, "-m", "detector", *map(str, command)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    terminated = False
    with psycopg.connect(pg15.conninfo, autocommit=True) as admin:
        deadline = time.monotonic() + 120
        while not terminated and process.poll() is None and time.monotonic() < deadline:
            row = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                "AND application_name = 'planshift' AND state = 'active' "
                "AND query LIKE '%%pg_sleep%%'",
                [database],
            ).fetchone()
            terminated = bool(row and row[0])
            time.sleep(0.05)
    out, err = process.communicate(timeout=120)
    err = " ".join(err.split())  # messages wrap at the console's width
    assert terminated, (out, err)
    assert process.returncode == 2, (out, err)
    assert "Traceback" not in err
    assert "error: pg15 failed during query sleeper (" in err
    assert "hint: the server's fault, not the query's" in err
    assert "run 1 keeps what was measured before, marked failed" in err
    listed = json.loads(planshift("runs", "--store", store, "--format", "json").stdout)
    (run,) = listed["runs"]
    assert run["status"] == "failed" and run["failed_queries"] == []
    assert run["note"].startswith("pg15 failed during query sleeper (")
    with Store(store, read_only=True) as db:
        names = names_of(db)
        rows = db.observations([t.target_id for t in db.targets()])
        assert {names[r.query_key] for r in rows} == {"quick"} and len(rows) == 3
        assert db.query_failures() == []
    compared = planshift("compare", "--store", store)
    assert compared.returncode == 2 and "no complete run" in compared.stderr


def test_settings_a_server_refuses_end_the_run_as_a_user_error(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    """A variant's setting the server refuses would fail every statement of that side: not
    a failure of the query, the run ends with error + hint."""
    text = (
        SETUP + '[variants.bad]\nwork_mem = "lots"\n\n[[queries]]\nname = "q"\nsql = "SELECT 1"\n'
    )
    (tmp_path / "w.toml").write_text('[workload]\nname = "bad"\nrepetitions = 2\n' + text)
    ran = planshift(
        "run",
        tmp_path / "w.toml",
        "--store",
        tmp_path / "s.duckdb",
        "--dsn",
        f"pg15={fresh_db(pg15)}",
        "--setup",
    )
    err = " ".join(ran.stderr.split())  # messages wrap at the console's width
    assert ran.returncode == 2 and "Traceback" not in err
    assert "error: pg15 refused its settings (work_mem = lots)" in err
    assert 'invalid value for parameter "work_mem": "lots"' in err
    assert "hint:" in err


PLAN_ONLY_AND_SECRETS = """
[workload]
name = "generic-and-secrets"
repetitions = 2
warmup = 0

[[queries]]
name = "generic_bgwriter"
sql = "SELECT buffers_backend FROM pg_stat_bgwriter WHERE $1::int > 0"
generic_plan = true

[[queries]]
name = "leaky"
sql = "SELECT %(v)s::int"
params = { v = { values = ["password=hunter2-secret"] } }
"""


def test_generic_plans_fail_alike_and_no_password_reaches_the_store(
    tmp_path: Path, pg15: EmbeddedCluster, pg17: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    """A generic_plan query that only 15 can plan is recorded on 17 in its own phase; an error
    message that quotes a password-like value is stored redacted, its parameters too."""
    (tmp_path / "w.toml").write_text(PLAN_ONLY_AND_SECRETS)
    workload = load_workload(tmp_path / "w.toml")
    dsns = {"pg15": fresh_db(pg15), "pg17": fresh_db(pg17)}
    specs = resolve_target_specs(workload.targets, ["pg15", "pg17"], dsns)
    with open_servers(specs, dsns=dsns) as servers, Store(tmp_path / "s.duckdb") as store:
        run_id = run_workload(workload, servers, store, RunOptions())
        targets = {t.target_id: t.name for t in store.targets([run_id])}
        names = names_of(store)
        failures = store.query_failures()
        planned = {
            (names[r.query_key], targets[r.target_id]) for r in store.observations(list(targets))
        }
    assert planned == {("generic_bgwriter", "pg15")}
    generic = [f for f in failures if names[f.query_key] == "generic_bgwriter"]
    assert [(targets[f.target_id], f.phase, f.sqlstate) for f in generic] == [
        ("pg17", "generic plan", "42703")
    ]
    leaky = [f for f in failures if names[f.query_key] == "leaky"]
    assert {targets[f.target_id] for f in leaky} == {"pg15", "pg17"}
    assert {f.message for f in leaky} == {'invalid input syntax for type integer: "password=***"'}
    assert {f.params for f in leaky} == {'"<redacted>"'}
    assert b"hunter2-secret" not in (tmp_path / "s.duckdb").read_bytes()


FAILURES = Path(__file__).resolve().parent / "fixtures" / "failures"


@pytest.mark.parametrize(
    "path", sorted(FAILURES.glob("pg*/*.json")), ids=lambda p: f"{p.parent.name}/{p.stem}"
)
def test_failure_fixtures_are_plans_or_errors_as_captured(path: Path) -> None:
    """PS700's case data (tests/fixtures/failures/capture_failures.py): each file is the plan
    or the error one version gave, and each scenario keeps its promise across versions."""
    document = json.loads(path.read_text())
    major = int(path.parent.name.removeprefix("pg"))
    assert document["server_version_num"] // 10000 == major
    assert document["scenario"] == path.stem
    kind = "error" if "error" in document else "explain"
    assert set(document) == {"scenario", "description", "server_version_num", "sql", kind}
    works = {
        "bgwriter_buffers_backend": major < 17,
        "stat_checkpointer": major >= 17,
        "ratio_divisor_1": True,
        "ratio_divisor_0": False,
    }[path.stem]
    assert (kind == "explain") == works
    if kind == "error":
        assert len(document["error"]["sqlstate"]) == 5 and document["error"]["message"]
    else:
        assert parse_plan(document["explain"]).analyzed
