"""Settings that flip a plan only together, or each alone, named as such on real PostgreSQL 15.

On a 47 MB table whose primary key has a correlation of ~0.5, the 6000-row range is a Bitmap
Heap Scan under random_page_cost 4, effective_cache_size 16MB, work_mem 4MB (`current`).
- `together`: random_page_cost 1.5 and effective_cache_size 4GB make it an Index Scan only
  together; either one alone leaves the bitmap scan (reverting either restores the plan).
- `either`: random_page_cost 1.1 alone makes it an Index Scan, work_mem 64kB alone a parallel
  sequential scan (the bitmap would be lossy); reverting one leaves the other's plan, so both
  must go back.
The variants are planned, not executed (timing = "plan"): attribution only re-plans.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.runner import RunOptions, run_workload
from collectors.servers.targets import open_servers, resolve_target_specs
from detector.engine.comparison.compare import compare_sides, resolve_side
from detector.engine.comparison.options import CompareOptions
from detector.jobs.workload import load_workload
from detector.model import ComparisonResult
from detector.store import Store

pytestmark = pytest.mark.pg  # every test here starts PostgreSQL

WORKLOAD = """
[workload]
name = "interactions"
repetitions = 4
timing = "plan"

[[targets]]
name = "pg15"
postgres = "15"

[setup]
sql = '''
SELECT setseed(0.42);
CREATE TABLE t (id int, k int, pad text) WITH (autovacuum_enabled = off);
INSERT INTO t SELECT i, i % 1000, repeat('x', 200) FROM generate_series(1, 200000) i
ORDER BY i + random() * 300000;
ALTER TABLE t ADD PRIMARY KEY (id);
ALTER TABLE t ALTER COLUMN id SET STATISTICS 10000;
VACUUM ANALYZE t;
'''

[variants.current]
random_page_cost = "4"
effective_cache_size = "16MB"
work_mem = "4MB"

[variants.together]
random_page_cost = "1.5"
effective_cache_size = "4GB"
work_mem = "4MB"

[variants.either]
random_page_cost = "1.1"
effective_cache_size = "16MB"
work_mem = "64kB"

[[queries]]
name = "range"
sql = "SELECT pad FROM t WHERE id BETWEEN %(lo)s AND %(lo)s + 6000"
params = { lo = { range = [40000, 140000] } }
"""


def _ps500(result: ComparisonResult) -> str:
    (finding,) = [f for f in result.findings if f.code == "PS500"]
    return finding.message


def test_settings_that_flip_a_plan_only_together_or_each_alone(tmp_path: Path) -> None:
    """The statistics target makes ANALYZE read every row of t: with a 30,000-row sample the
    correlation of id, so the switch points, moved between runs, and once in a CI run reverting
    random_page_cost alone restored the `either` plan."""
    path = tmp_path / "w.toml"
    path.write_text(WORKLOAD)
    workload = load_workload(path)
    with (
        open_servers(resolve_target_specs(workload.targets, [], {})) as servers,
        Store(tmp_path / "s.duckdb") as store,
    ):
        run_id = run_workload(workload, servers, store, RunOptions())
        together, either = (
            compare_sides(
                store,
                resolve_side(store, "current", run_id),
                resolve_side(store, candidate, run_id),
                CompareOptions(noise_run=None),
            )
            for candidate in ("together", "either")
        )
    (query,) = together.queries
    assert query.plan_changed and "BitmapHeapScan" in query.baseline.dominant.signature
    tested = query.attribution
    assert tested is not None
    assert tested["restoring_sets"] == [["effective_cache_size"], ["random_page_cost"]]
    assert tested["causes"] == [["effective_cache_size", "random_page_cost"]]
    assert tested["restores"] == ["effective_cache_size", "random_page_cost"]
    assert tested["search"]["complete"] is True
    message = _ps500(together)
    assert message.startswith(
        "caused by effective_cache_size 16MB -> 4GB and random_page_cost 4 -> 1.5 together "
        "(either one reverted restores the plan)"
    )
    assert "not move it" not in message

    (query,) = either.queries
    assert query.plan_changed
    tested = query.attribution
    assert tested is not None
    assert tested["restoring_sets"] == [["random_page_cost", "work_mem"]]
    assert tested["causes"] == [["random_page_cost"], ["work_mem"]]
    message = _ps500(either)
    assert message.startswith(
        "caused by either of random_page_cost 4 -> 1.1 or work_mem 4MB -> 64kB alone "
        "(reverting both is needed to restore the plan)"
    )
    # effective_cache_size is the same on both: not even tested
    assert tested["tested"] == ["random_page_cost", "work_mem"]
    assert "not move it" not in message
