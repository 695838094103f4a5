"""The plan a run's candidate rejected is forced and timed even when no setting explains the flip:
two clusters of one version whose table differs only in its visibility map."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_and_compare

pytestmark = pytest.mark.pg  # every test here starts PostgreSQL

WORKLOAD = """
[workload]
name = "visibility-map"
repetitions = 6
warmup = 1

[[targets]]
name = "vacuumed"
postgres = "15"

[[targets]]
name = "churned"
postgres = "15"
setup = "UPDATE t SET v = v + 1 WHERE id % 10 = 0; ANALYZE t"

[setup]
sql = '''
CREATE TABLE t (id int PRIMARY KEY, v int, pad text) WITH (autovacuum_enabled = off);
INSERT INTO t SELECT i, i % 100, repeat('x', 80) FROM generate_series(1, 200000) i;
VACUUM ANALYZE t;
'''

[[queries]]
name = "ids"
sql = "SELECT count(id) FROM t WHERE id BETWEEN %(lo)s AND %(lo)s + 40000"
params = { lo = { range = [1, 150000] } }
"""


def test_a_flip_no_setting_explains_is_forced_back_and_timed(tmp_path: Path) -> None:
    result = run_and_compare(tmp_path, WORKLOAD, "vacuumed", "churned")
    (query,) = result.queries
    assert query.plan_changed and "IndexOnlyScan" in query.baseline.dominant.signature
    tested = query.attribution
    assert tested is not None and tested["tested"] == [] and tested["restores"] == []
    forced = tested["forced"]
    assert forced and all(name.startswith(("enable_", "max_parallel")) for name in forced)
    timed = tested["counterfactual"]
    assert timed["forced_settings"] == forced and timed["fingerprint_matched"] is True
    assert timed["samples"] == 6 and timed["ratio_vs_chosen"] > 0
    assert query.baseline.all_visible("t") == 1.0 and query.candidate.all_visible("t") == 0.0
    (vm,) = [f for f in result.findings if f.code == "PS103"]
    assert "t: IndexOnlyScan(t_pkey) -> BitmapHeapScan(t_pkey): all-visible pages 100% -> 0%" in (
        vm.message
    )
    assert "the visibility map no longer covers the table" in vm.message
    (cause,) = [f for f in result.findings if f.code == "PS500"]
    assert cause.message.startswith(
        "no setting differs between the variants: the flip follows the table statistics"
    )
    assert "table statistics: t correlation id 1.000 -> " in cause.message
    assert "t all-visible pages 100% -> 0%" in cause.message
    assert "the rejected plan, timed on the candidate (enable_bitmapscan = off" in cause.message
