"""A plan change between versions that no setting explains is called the new version's planner
change, on real PostgreSQL 17 and 18 (18 rewrites `id = a OR id = b` into `id = ANY (...)`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import INSTALL_HOW, run_and_compare

from collectors.servers.installations import find_installation
from detector.errors import PlanshiftError

WORKLOAD = """
[workload]
name = "or-list"
repetitions = 6
warmup = 1

[[targets]]
name = "pg17"
postgres = "17"

[[targets]]
name = "pg18"
postgres = "18"

[setup]
sql = '''
CREATE TABLE t (id int PRIMARY KEY, v int);
INSERT INTO t SELECT i, i % 100 FROM generate_series(1, 200000) i;
VACUUM ANALYZE t;
'''

[[queries]]
name = "or_ids"
sql = "SELECT v FROM t WHERE id = %(a)s OR id = %(a)s + 7 OR id = %(a)s + 99"
params = { a = { range = [1, 150000] } }
"""


@pytest.mark.pg
def test_a_version_flip_no_setting_explains_is_the_planner_s(tmp_path: Path) -> None:
    for major in (17, 18):
        try:
            find_installation(major)
        except PlanshiftError:
            pytest.skip(f"PostgreSQL {major} is not available: {INSTALL_HOW[major]}")
    result = run_and_compare(tmp_path, WORKLOAD, "pg17", "pg18")
    (query,) = result.queries
    assert "BitmapOr" in query.baseline.dominant.signature
    assert "BitmapOr" not in query.candidate.dominant.signature
    assert query.attribution is not None and query.attribution["tested"] == []
    (cause,) = [f for f in result.findings if f.code == "PS500"]
    assert cause.message.startswith("no setting differs between the variants: PostgreSQL 17.")
    assert " -> 18." in cause.message and "'s planner" in cause.message
    timed = query.attribution["counterfactual"]  # 18 plans the OR as = ANY: no old plan to force
    assert timed["fingerprint_matched"] is False and timed["ratio_vs_chosen"] is None
    assert "did not give the baseline's plan" in timed["reason"]
    assert "the rejected plan could not be timed on the candidate: no setting differed" in (
        cause.message
    )
