"""Plan-only queries (`generic_plan = true`): EXPLAIN (GENERIC_PLAN) on 16+, PREPARE before."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import FreshDb

from collectors.runner import RunOptions, run_workload
from collectors.servers.targets import open_servers, resolve_target_specs
from detector.engine.comparison.compare import compare_sides, resolve_side
from detector.engine.comparison.options import CompareOptions
from detector.jobs.workload import load_workload
from detector.model import Verdict
from detector.store import Store

WORKLOAD = """
[workload]
name = "generic"
repetitions = 3
warmup = 0

[setup]
sql = '''
CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO t SELECT i, i % 10 FROM generate_series(1, 10000) i;
VACUUM ANALYZE t;
'''

[[queries]]
name = "from_pgss"
sql = "SELECT sum(v) FROM t WHERE id BETWEEN $1 AND $2"
generic_plan = true
"""


@pytest.mark.parametrize(("old", "new"), [("pg15", "pg18"), ("pg14", "pg16")])
def test_generic_plans_are_plan_only_before_and_from_16(
    tmp_path: Path, fresh_db: FreshDb, old: str, new: str, request: pytest.FixtureRequest
) -> None:
    path = tmp_path / "w.toml"
    path.write_text(WORKLOAD)
    workload = load_workload(path)
    clusters = [request.getfixturevalue(name) for name in (old, new)]
    dsns = {"old": fresh_db(clusters[0]), "new": fresh_db(clusters[1])}
    specs = resolve_target_specs(workload.targets, ["old", "new"], dsns)
    with Store(tmp_path / "s.duckdb") as store:
        with open_servers(specs, dsns=dsns) as servers:
            run_id = run_workload(workload, servers, store, RunOptions(setup_on_dsn=True))
        base, cand = resolve_side(store, "old", run_id), resolve_side(store, "new", run_id)
        rows = store.observations([base.target_id, cand.target_id])
        assert len(rows) == 2, "one plan per side, whatever the repetitions"
        assert all(r.duration_ms is None for r in rows)
        plans = [store.plan(r.fingerprint) for r in rows]
        assert all(not p.analyzed for p in plans)
        for row in rows:
            assert "$1" in store.plan_record(row.fingerprint).plan_json, "planned without values"
        # the generic plan on both versions: a range on $1/$2 (no literal values planned)
        assert {store.plan_record(r.fingerprint).signature for r in rows} <= {
            "Aggregate > IndexScan(t t_pkey)",
            "Aggregate > BitmapHeapScan(t) > BitmapIndexScan(t_pkey)",
        }
        result = compare_sides(store, base, cand, CompareOptions())
    (query,) = result.queries
    assert query.timing.verdict == Verdict.INCONCLUSIVE
    assert "plan-only" in query.timing.describe()
    assert not any(f.code == "PS200" for f in result.findings)
