"""CI-gate features end to end on a real store: config, suppressions, approved plans, A/A noise."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import FORCED_PLANS_WORKLOAD, FreshDb, planshift

from collectors.servers.embedded import EmbeddedCluster
from detector.engine.comparison.approvals import read_approvals
from detector.engine.comparison.config import load_config, parse_config
from detector.errors import PlanshiftError
from detector.jobs.compare_options import parse_rule_option

WORKLOAD = (
    FORCED_PLANS_WORKLOAD.replace('name = "cli-test"', 'name = "gate-test"')
    + """
[[queries]]
name = "count"
sql = "SELECT count(*) FROM t WHERE v = %(v)s"
params = { v = { range = [0, 99] } }
"""
)


@pytest.fixture
def store(tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb) -> Path:
    (tmp_path / "w.toml").write_text(WORKLOAD)
    ran = planshift("run", "w.toml", "--setup", "--dsn", f"local={fresh_db(pg15)}", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    return tmp_path / "planshift.duckdb"


def test_config_suppression_and_fail_on(tmp_path: Path, store: Path) -> None:
    compare = ("compare", "-b", "indexed", "-c", "seqscan")
    before = planshift(*compare, cwd=tmp_path)
    assert before.returncode == 1 and "PS100 plan-shape-changed lookup" in before.stdout
    # PS100 only: the other findings of lookup stay for the flag below (before, the suppression
    # took all of them and the flag relied on a JIT finding of "count", only where JIT exists)
    (tmp_path / "planshift.toml").write_text(
        'fail-on = "never"\n\n[[suppress]]\nquery = "lookup"\nrules = ["PS100"]\n'
        'reason = "known: test forces plans"\n'
    )
    after = planshift(*compare, cwd=tmp_path)
    assert after.returncode == 0, after.stderr
    assert "suppressed PS100 plan-shape-changed lookup: known: test forces plans" in after.stdout
    assert "PS100 plan-shape-changed lookup:" not in after.stdout.replace("suppressed PS100", "")
    # a flag wins over the file
    assert planshift(*compare, "--fail-on", "info", cwd=tmp_path).returncode == 1


def test_approve_then_gate_on_unapproved_plans(tmp_path: Path, store: Path) -> None:
    made = planshift("approve", "-t", "indexed", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    lock = tmp_path / "planshift.lock"
    approved = read_approvals(lock)
    assert set(approved) == {"lookup", "count"}
    gate = ("compare", "-b", "indexed", "-c", "seqscan", "--approved", lock, "--select", "PS600")
    flagged = planshift(*gate, cwd=tmp_path)
    assert flagged.returncode == 1
    assert "PS600 unapproved-plan lookup: plan not approved: SeqScan(t)" in flagged.stdout
    again = planshift("approve", "-t", "indexed", cwd=tmp_path)
    assert again.returncode == 2 and "--update" in again.stderr
    accepted = planshift("approve", "-t", "seqscan", "--update", cwd=tmp_path)
    assert accepted.returncode == 0 and "removed" in accepted.stdout
    assert planshift(*gate, cwd=tmp_path).returncode == 0
    assert "SeqScan(t)" in lock.read_text()


def test_noise_run_gives_floors_that_compare_uses(
    tmp_path: Path, store: Path, pg15: EmbeddedCluster
) -> None:
    workload = tmp_path / "w.toml"
    ran = planshift("noise", workload, "--target", "pg15", "--repetitions", "6", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "lookup" in ran.stdout and "%" in ran.stdout
    runs = planshift("runs", cwd=tmp_path)
    assert "noise:pg15" in runs.stdout and "aa1, aa2" in runs.stdout


def test_config_errors_name_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "planshift.toml"
    with pytest.raises(
        PlanshiftError,
        match=r"planshift.toml: suppress\[0\].reason: every suppression needs a reason",
    ):
        parse_config(path, {"suppress": [{"query": "q"}]})
    with pytest.raises(PlanshiftError, match=r"planshift\.toml: fail-on: unknown value"):
        parse_config(path, {"fail-on": "sometimes"})
    with pytest.raises(PlanshiftError, match=r"planshift\.toml: min-effct: unknown setting"):
        parse_config(path, {"min-effct": 0.2})


def test_pyproject_tool_section_is_found_from_a_subdirectory(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.planshift]\nmin-effect = 0.2\nignore = ["PS201"]\n'
    )
    (tmp_path / "sub").mkdir()
    config = load_config(start=tmp_path / "sub")
    assert config.min_effect == 0.2 and config.ignore == ("PS201",)
    assert load_config(start=tmp_path.parent / "nonexistent-dir-xyz").source is None


def test_rule_option_parsing() -> None:
    assert parse_rule_option("PS101.near_tie=0.03") == ("PS101", "near_tie", 0.03)
    assert parse_rule_option("PS200.min_delta_ms=1") == ("PS200", "min_delta_ms", 1)
    with pytest.raises(PlanshiftError, match=r"expected RULE\.OPTION=VALUE"):
        parse_rule_option("near_tie=0.03")


def test_compare_save_keeps_the_comparison_and_its_findings(tmp_path: Path, store: Path) -> None:
    import json

    import duckdb

    saved = planshift(
        "compare", "-b", "indexed", "-c", "seqscan", "--save", "-f", "json", cwd=tmp_path
    )
    assert saved.returncode == 1
    document = json.loads(saved.stdout)  # the message goes to stderr, stdout stays JSON
    assert "comparison 1 saved" in saved.stderr
    with duckdb.connect(str(store), read_only=True) as conn:
        rows = conn.execute("SELECT code, query_name FROM findings ORDER BY position").fetchall()
    assert rows == [(f["code"], f["query"]) for f in document["findings"]]


def test_rule_typos_are_user_errors_with_a_hint_not_findings(tmp_path: Path, store: Path) -> None:
    compare = ("compare", "-b", "indexed", "-c", "seqscan")
    cases = [
        (("--select", "PS9"), "selector 'PS9' matches no rule", "did you mean PS"),
        (("--ignore", "index-to-bitmap"), "matches no rule", "index-to-bitmap-scan"),
        (("--rule-option", "PS100.near_ti=1"), "has no option 'near_ti'", "near_tie"),
        (("--rule-option", "PS1000.near_tie=1"), "unknown rule 'PS1000'", "did you mean"),
    ]
    for args, message, hint in cases:
        result = planshift(*compare, *args, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr and "hint:" in result.stderr, result.stderr
        assert hint in result.stderr.split("hint:")[1] and "Traceback" not in result.stderr
    for text, key in [
        ('ignore = ["PS999"]\n', "planshift.toml: ignore: selector 'PS999'"),
        ('select = ["plan-flp"]\n', "planshift.toml: select: selector 'plan-flp'"),
        ("[rules.PS100]\nnear_ti = 0.1\n", "planshift.toml: rules.PS100: "),
    ]:
        (tmp_path / "planshift.toml").write_text(text)
        result = planshift(*compare, cwd=tmp_path)
        assert result.returncode == 2 and key in result.stderr, result.stderr
        assert "hint:" in result.stderr and "Traceback" not in result.stderr


VARIED_WORKLOAD = """
[workload]
name = "aa-varied"
repetitions = 12
warmup = 1

[setup]
sql = '''
DROP TABLE IF EXISTS r;
CREATE TABLE r (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO r SELECT i, i % 97 FROM generate_series(1, 200000) i;
VACUUM ANALYZE r;
'''

[variants.base]
work_mem = "4MB"

[[queries]]
name = "range"
sql = "SELECT sum(v) FROM r WHERE id BETWEEN %(lo)s AND %(lo)s + %(len)s"
params = { lo = { range = [1, 150000] }, len = { choice = [300, 3000, 30000] } }
"""


@pytest.mark.pg
def test_noise_floors_are_paired_for_interleaved_aa_runs(tmp_path: Path) -> None:
    """Range lengths 300-30,000 rows spread each side's timings 100x; the A/A run is interleaved,
    so its floor comes from the per-sample ratios (a few %), not from that spread."""
    from detector.engine import stats
    from detector.engine.comparison.noise import noise_floors
    from detector.engine.comparison.query_pairs import pair_sides
    from detector.store import Store

    (tmp_path / "w.toml").write_text(VARIED_WORKLOAD)
    ran = planshift("noise", "w.toml", "--target", "pg15", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    with Store(tmp_path / "planshift.duckdb", read_only=True) as store:
        run_id = store.runs()[-1].run_id
        floors = noise_floors(store, run_id)
        first, second = store.targets([run_id])
        (pair,) = pair_sides(store, first, second)
    two_sample = stats.noise_floor(pair.baseline.durations_ms, pair.candidate.durations_ms)
    assert two_sample > 0.5, two_sample  # the parameters' spread: no verdict could clear it
    assert floors["range"] < two_sample / 3, (floors, two_sample)


def test_ps600_lists_the_lock_s_approved_plans(tmp_path: Path) -> None:
    """A real lock file (`planshift approve` of the forced index-scan side of the committed
    store, a real PostgreSQL 15 run) checked against sides that ran other plans: each PS600
    message lists the plans the lock approves for that query and point, which the baseline
    never ran (it used to say `no plan approved for this query`)."""
    import json

    from helpers import fixed_store

    from detector.engine.comparison.approvals import approval_key

    store, lock = fixed_store(), tmp_path / "planshift.lock"
    made = planshift("approve", "-s", store, "-t", "indexscan", "--file", lock, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    approved = read_approvals(lock)
    gate = ("compare", "-s", store, "-b", "seqscan", "-c", "current", "--approved", lock)
    shown = planshift(*gate, "--select", "PS600", "-f", "json", cwd=tmp_path)
    assert shown.returncode == 1, shown.stderr
    findings = json.loads(shown.stdout)["findings"]
    assert findings and {f["code"] for f in findings} == {"PS600"}
    for finding in findings:
        lock_plans = approved[approval_key(finding["query"], finding["point"])]
        assert "no plan approved" not in finding["message"]
        assert finding["message"].endswith(
            "; approved: " + " | ".join(sorted(set(lock_plans.values())))
        )
        assert finding["evidence"]["fingerprint"] not in lock_plans
