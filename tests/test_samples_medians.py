"""Medians of many windows at once (`row_medians`, `window_medians`) equal numpy's median of
each window: random windows end to end and scattered, with NaNs and empty windows."""

from __future__ import annotations

import numpy as np
import pytest

from detector.model.samples import row_medians, window_medians


def expected(values: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> list[float]:
    return [
        float(np.median(values[s : s + n])) if n else float("nan")
        for s, n in zip(starts.tolist(), sizes.tolist(), strict=True)
    ]


@pytest.mark.parametrize("seed", range(20))
def test_window_medians_equal_numpys(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 12, size=int(rng.integers(1, 60)))
    if seed % 2:  # one size for every window: the end-to-end case
        sizes[:] = int(rng.integers(1, 12))
    values = rng.lognormal(0, 1, int(sizes.sum())).round(int(rng.integers(0, 3)))  # ties too
    values[rng.random(len(values)) < 0.03] = np.nan
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    got = window_medians(values, starts, sizes)
    np.testing.assert_array_equal(got, expected(values, starts, sizes))
    # the same windows in another order: no longer end to end
    order = rng.permutation(len(sizes))
    got = window_medians(values, starts[order], sizes[order])
    np.testing.assert_array_equal(got, expected(values, starts[order], sizes[order]))


def test_row_medians_of_no_columns_and_of_nan_rows() -> None:
    assert np.isnan(row_medians(np.empty((3, 0)))).all()
    rows = np.array([[3.0, 1.0, 2.0, 10.0], [np.nan, 1.0, 2.0, 3.0], [5.0, 5.0, 1.0, 9.0]])
    np.testing.assert_array_equal(row_medians(rows), [2.5, np.nan, 5.0])
