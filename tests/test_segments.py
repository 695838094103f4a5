"""detector.engine.comparison.segments: batched medians and percentiles equal the one-sample functions, bit for bit."""

from __future__ import annotations

import numpy as np

from detector.engine import stats
from detector.engine.comparison.segments import offsets, segment_quantiles


def test_segment_quantiles_match_timing_stats_and_numpy() -> None:
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 14, 400)  # empty segments included
    values = rng.lognormal(0.5, 0.4, int(lengths.sum()))
    bounds = offsets(lengths)
    found = segment_quantiles(values, bounds[:-1], bounds[1:], (0.5, 0.9, 0.99, 0.0, 1.0))
    for i, length in enumerate(lengths.tolist()):
        segment = values[bounds[i] : bounds[i + 1]].tolist()
        if not length:
            assert np.isnan(found[i]).all()
            continue
        expected = stats.timing_stats(segment)
        assert found[i].tolist() == [
            expected.median_ms,
            expected.p90_ms,
            expected.p99_ms,
            expected.min_ms,
            expected.max_ms,
        ]
        assert found[i, 0] == np.median(segment)
        assert found[i, 1] == np.percentile(segment, 90)


def test_offsets_count_runs() -> None:
    assert offsets(np.array([3, 0, 2])).tolist() == [0, 3, 3, 5]
    assert offsets(np.array([True, False, True])).tolist() == [0, 1, 1, 2]
