"""A flip between two servers that follows their ANALYZE samples is named as such, on real
PostgreSQL 15: two clusters of one version, one table, one setting; one server analyzed its
table with default_statistics_target = 1 (a 300-row sample, a two-bound histogram), the other
with the default 100.

The table's x is dense (one row per value) up to 100000 and sparse (one row per 9 values)
beyond, in random physical order. For a range in the dense part the fine histogram estimates
about the right number of rows; the coarse one spreads 200000 rows evenly over 1.9 million
values and estimates a fifth. Both servers switch from Index Scan to Bitmap Heap Scan between
about 160 and 600 estimated rows (random_page_cost 1.1; the sweep's N = 160, 640, 5120 pin
each server's switch), so at N = 640 the fine server (~630 estimated) reads a bitmap and the
coarse one (~129) an index: the flip follows the estimate, not the version (the same) nor a
setting (the same)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_and_compare

pytestmark = pytest.mark.pg  # every test here starts PostgreSQL

WORKLOAD = """
[workload]
name = "analyze-samples"
repetitions = 5
warmup = 0

[[targets]]
name = "fine"
postgres = "15"

[[targets]]
name = "coarse"
postgres = "15"
setup = "SET default_statistics_target = 1; ANALYZE s"

[setup]
sql = '''
SELECT setseed(0.42);
CREATE TABLE s (id int PRIMARY KEY, x int, pad text) WITH (autovacuum_enabled = off);
INSERT INTO s SELECT i, CASE WHEN i <= 100000 THEN i ELSE 100000 + (i - 100000) * 9 END,
    repeat('x', 200)
FROM generate_series(1, 200000) i ORDER BY random();
CREATE INDEX s_x ON s (x);
VACUUM ANALYZE s;
'''

[variants.ssd]
random_page_cost = "1.1"

[[queries]]
name = "x_range"
sql = "SELECT pad FROM s WHERE x BETWEEN %(lo)s AND %(lo)s + %(N)s"
params = { lo = { range = [1000, 90000] } }
sweep = { param = "N", values = [160, 640, 5120] }
"""


def test_a_flip_that_follows_the_analyze_sample_is_named_by_the_estimate(
    tmp_path: Path,
) -> None:
    """Twice, each run with new clusters and new ANALYZE samples: the same cause, and the same
    near-tie severity (the candidate's chosen and rejected plans costed on the candidate)."""
    severities = []
    for attempt in range(2):
        (tmp_path / str(attempt)).mkdir()
        result = run_and_compare(tmp_path / str(attempt), WORKLOAD, "fine", "coarse")
        by_point = {q.point: q for q in result.queries}
        flipped = by_point["N=640"]
        assert "BitmapHeapScan" in flipped.baseline.dominant.signature
        assert "IndexScan" in flipped.candidate.dominant.signature
        tested = flipped.attribution
        assert tested is not None and tested["tested"] == []
        estimates = tested["estimates"]
        assert estimates["relation"] == "s"
        assert 500 < estimates["baseline_rows"] < 800 and 80 < estimates["candidate_rows"] < 200
        assert estimates["switch_low"] < estimates["switch_high"]
        assert estimates["switch_low"] >= estimates["candidate_rows"]
        assert estimates["switch_high"] <= estimates["baseline_rows"]
        (cause,) = [f for f in result.findings if f.code == "PS500" and f.point == "N=640"]
        assert cause.message.startswith(
            "no setting differs between the variants: the flip follows the planner's row "
            "estimate (ANALYZE sample): "
        )
        assert " estimated rows of s for the same parameters; both sides switch plans " in (
            cause.message
        )
        (flip,) = [f for f in result.findings if f.code == "PS100" and f.point == "N=640"]
        assert flip.evidence["near_tie_basis"] == "candidate"
        severities.append((flip.evidence["near_tie"], flip.severity))
    assert severities[0] == severities[1]
