"""Paired statistics: A/A and known-effect distributions, pairing order, the biweight t
against its textbook form, interval and test agreeing, false discovery control, noise floors."""

from __future__ import annotations

import numpy as np
import pytest

from detector.engine import false_discoveries, stats
from detector.engine.stats_paired import (
    biweight_t,
    compare_paired,
    compare_paired_batch,
)
from detector.model import Verdict


def varied(rng: np.random.Generator, n: int, effect: float) -> tuple[list[float], list[float]]:
    """Parameter-varied samples (range lengths 300 to 30,000 rows) under a load that drifts
    during the run and hits both executions of a sample alike, plus 3% per-execution noise."""
    rows = rng.uniform(300, 30_000, n)
    load = np.exp(np.cumsum(rng.normal(0, 0.15, n)))
    base = rows * 1e-3 * load * rng.lognormal(0, 0.03, n)
    cand = rows * 1e-3 * load * effect * rng.lognormal(0, 0.03, n)
    return base.tolist(), cand.tolist()


def test_a_known_slowdown_is_found_where_unpaired_samples_cannot_tell() -> None:
    rng = np.random.default_rng(12)
    base, cand = varied(rng, 12, 1.25)
    paired = compare_paired(base, cand)
    assert paired.verdict is Verdict.REGRESSED and paired.paired
    assert paired.ci_low is not None and paired.ci_high is not None
    assert paired.ci_low < 1.25 < paired.ci_high
    assert stats.compare_timings(base, cand).verdict is Verdict.INCONCLUSIVE


def test_a_a_pairs_raise_no_false_alarm_and_are_mostly_unchanged() -> None:
    rng = np.random.default_rng(5)
    results = compare_paired_batch([varied(rng, 10, 1.0) for _ in range(500)])
    verdicts = [r.verdict for r in results]
    assert Verdict.REGRESSED not in verdicts and Verdict.IMPROVED not in verdicts
    assert verdicts.count(Verdict.UNCHANGED) > 450


@pytest.mark.parametrize(("effect", "n"), [(1.3, 10), (1.2, 20)])
def test_known_effects_are_detected_at_the_issue_sample_sizes(effect: float, n: int) -> None:
    rng = np.random.default_rng(int(effect * 100) + n)
    results = compare_paired_batch([varied(rng, n, effect) for _ in range(200)])
    detected = sum(r.verdict is Verdict.REGRESSED for r in results)
    assert detected >= 190, detected


def test_the_order_of_pairs_does_not_matter_and_swapping_sides_inverts() -> None:
    rng = np.random.default_rng(3)
    base, cand = varied(rng, 15, 1.15)
    order = rng.permutation(15)
    a = compare_paired(base, cand)
    b = compare_paired([base[i] for i in order], [cand[i] for i in order])
    assert (a.ratio, a.ci_low, a.ci_high, a.p_value) == pytest.approx(
        (b.ratio, b.ci_low, b.ci_high, b.p_value), rel=1e-12
    )
    flipped = compare_paired(cand, base)
    assert flipped.ratio == pytest.approx(1 / a.ratio)  # type: ignore[operator]
    assert flipped.ci_low == pytest.approx(1 / a.ci_high)  # type: ignore[operator]
    assert flipped.p_value == pytest.approx(a.p_value, rel=1e-9)
    assert flipped.verdict is Verdict.IMPROVED and a.verdict is Verdict.REGRESSED


def test_the_batch_equals_one_by_one() -> None:
    rng = np.random.default_rng(9)
    pairs = [varied(rng, n, e) for n in (6, 10, 10, 25) for e in (1.0, 1.12, 1.4)]
    assert compare_paired_batch(pairs) == [compare_paired(b, c) for b, c in pairs]


def textbook_biweight(x: np.ndarray) -> tuple[float, float]:
    """Mosteller and Tukey's biweight location (c = 6) and its standard error from the
    biweight midvariance (c = 9), both around the MAD, written pair by pair."""
    median = float(np.median(x))
    mad = float(np.median(np.abs(x - median)))
    t = median
    for _ in range(10):
        u = (x - t) / (6 * mad)
        w = np.where(np.abs(u) < 1, (1 - u**2) ** 2, 0.0)
        t += float(np.sum((x - t) * w) / np.sum(w))
    u = (x - t) / (9 * mad)
    inside = np.abs(u) < 1
    variance = (
        x.size
        * np.sum(((x - t) ** 2 * (1 - u**2) ** 4)[inside])
        / np.sum(((1 - u**2) * (1 - 5 * u**2))[inside]) ** 2
    )
    return t, float(np.sqrt(variance / x.size))


@pytest.mark.parametrize("n", [5, 10, 11, 30])
def test_the_biweight_matches_its_textbook_form(n: int) -> None:
    rows = np.random.default_rng(n).standard_t(2, (40, n)) * 0.1
    location, se, df, counted = biweight_t(rows)
    expected = [textbook_biweight(row) for row in rows]
    assert location == pytest.approx([e[0] for e in expected], rel=1e-9, abs=1e-12)
    assert se == pytest.approx([e[1] for e in expected], rel=1e-9)
    assert df == (n - 1) / 2
    mads = np.median(np.abs(rows - np.median(rows, axis=1)[:, None]), axis=1)
    inside = np.abs(rows - location[:, None]) < 9 * mads[:, None]
    assert counted.tolist() == inside.sum(axis=1).tolist()


def test_the_interval_and_the_test_always_agree() -> None:
    rng = np.random.default_rng(8)
    pairs = [preempted(rng, n, e) for n in (5, 8, 12, 20) for e in (1.0, 1.05, 1.1) * 100]
    for r in compare_paired_batch(pairs, min_effect=0.0):
        assert r.ci_low is not None and r.ci_high is not None and r.p_value is not None
        assert r.ci_low <= r.ratio <= r.ci_high  # type: ignore[operator]
        if abs(r.p_value - 0.05) > 1e-9:
            assert (r.ci_low > 1 or r.ci_high < 1) == (r.p_value < 0.05)
        assert r.reason != "" and "disagree" not in r.reason


def test_timings_at_the_clock_resolution_neither_crash_nor_invent_an_effect() -> None:
    same = compare_paired([0.012] * 10, [0.012] * 10)
    assert same.verdict is Verdict.UNCHANGED and same.p_value == 1.0
    assert (same.ratio, same.ci_low, same.ci_high) == (1.0, 1.0, 1.0)
    mostly = compare_paired([0.012] * 10, [0.012] * 7 + [0.013, 0.011, 0.014])
    assert mostly.verdict is Verdict.UNCHANGED and mostly.ratio == pytest.approx(1.0, abs=0.01)
    constant = compare_paired([1.0] * 10, [1.5] * 10)
    assert constant.verdict is Verdict.REGRESSED and constant.p_value == 0.0
    assert constant.ratio == pytest.approx(1.5)


def test_false_discovery_control_across_many_queries() -> None:
    rng = np.random.default_rng(21)
    noisy = [
        (b.tolist(), (b * rng.lognormal(0, 0.4, 6)).tolist())
        for b in (rng.uniform(1, 2, 6) for _ in range(2000))
    ]
    alone = compare_paired_batch(noisy, min_effect=0.0)
    controlled = false_discoveries.control_false_discoveries(alone)
    flagged = [r for r in alone if r.verdict in (Verdict.REGRESSED, Verdict.IMPROVED)]
    assert flagged, "without control some A/A queries come out significant"
    assert not [r for r in controlled if r.verdict in (Verdict.REGRESSED, Verdict.IMPROVED)]
    demoted = next(r for r in controlled if r.reason.startswith("p="))
    assert "false discovery control" in demoted.reason and demoted.q_value is not None
    real = compare_paired_batch([varied(rng, 20, 1.5)])
    kept = false_discoveries.control_false_discoveries(real + alone[:50])
    assert kept[0].verdict is Verdict.REGRESSED


def test_a_noise_floor_never_widens_unchanged() -> None:
    rng = np.random.default_rng(30)
    base, cand = varied(rng, 10, 1.17)
    plain = compare_paired(base, cand)
    floored = compare_paired(base, cand, noise_floor=0.49)
    assert plain.verdict is Verdict.REGRESSED
    assert floored.verdict is Verdict.INCONCLUSIVE
    assert "noise floor" in floored.reason
    for floor in (0.0, 0.2, 0.49):
        result = stats.compare_timings(base, cand, noise_floor=floor)
        if result.verdict is Verdict.UNCHANGED:
            assert result.ci_low is not None and result.ci_high is not None
            assert result.ci_low >= 1 / 1.1 and result.ci_high <= 1.1


def test_inconclusive_says_how_many_samples_would_decide() -> None:
    rng = np.random.default_rng(2)
    base, cand = varied(rng, 6, 1.12)
    noisy = [b * x for b, x in zip(cand, rng.lognormal(0, 0.08, 6), strict=True)]
    result = compare_paired(base, noisy)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.decide_at is not None and result.decide_at > 6
    assert f"about {result.decide_at} samples would decide it" in result.describe()


def preempted(rng: np.random.Generator, n: int, effect: float) -> tuple[list[float], list[float]]:
    """`varied`, plus what a loaded machine does: one execution in eight, on either side, is
    descheduled and takes 2-5x longer."""
    base, cand = (np.asarray(x) for x in varied(rng, n, effect))
    for side in (base, cand):
        hit = rng.random(n) < 0.125
        side[hit] *= rng.uniform(2, 5, int(hit.sum()))
    return base.tolist(), cand.tolist()


def test_one_descheduled_execution_does_not_veto_a_clear_effect() -> None:
    ratios = [1.34, 1.39, 1.29, 1.24, 1.26, 1.16, 0.51, 1.36, 1.35, 1.29]
    result = compare_paired([1.0] * 10, ratios)
    assert result.verdict is Verdict.REGRESSED
    assert result.p_value is not None and result.p_value < 0.001


@pytest.mark.parametrize(
    "ratios",
    [  # measured under two CPU burners (bench/bench_detection.py), a 1.3x slowdown, 10 pairs
        [0.50, 0.60, 1.18, 1.27, 1.28, 1.31, 1.33, 1.34, 1.35, 1.47],
        [1.11, 1.21, 1.27, 1.31, 1.33, 1.38, 1.40, 2.63, 2.81, 3.23],
        [0.29, 0.66, 1.18, 1.21, 1.28, 1.29, 1.30, 1.33, 1.35, 1.40],
    ],
)
def test_three_descheduled_pairs_do_not_hide_a_slowdown(ratios: list[float]) -> None:
    result = compare_paired([1.0] * 10, ratios)
    assert result.verdict is Verdict.REGRESSED, result.describe()
    assert result.ci_low is not None and result.ci_low > 1.15 and result.ratio is not None
    assert 1.2 < result.ratio < 1.4


@pytest.mark.parametrize("n", [5, 10, 20])
@pytest.mark.parametrize("load", ["steady", "descheduling"])
def test_under_a_a_the_test_keeps_its_level(n: int, load: str) -> None:
    rng = np.random.default_rng(n + 100)
    make = preempted if load == "descheduling" else varied
    pairs = [make(rng, n, 1.0) for _ in range(3000)]
    p = np.array([r.p_value for r in compare_paired_batch(pairs, min_effect=0.0)], np.float64)
    assert 0.03 < (p < 0.05).mean() < 0.08
    flagged = compare_paired_batch(pairs)  # with the 10% minimum effect
    assert sum(r.verdict in (Verdict.REGRESSED, Verdict.IMPROVED) for r in flagged) <= 15


def test_a_lone_regression_survives_false_discovery_control_on_a_loaded_machine() -> None:
    rng = np.random.default_rng(77)
    found = 0
    for _ in range(40):
        batch = [preempted(rng, 10, 1.0) for _ in range(27)] + [preempted(rng, 10, 1.3)]
        found += false_discoveries.control_false_discoveries(compare_paired_batch(batch))[
            -1
        ].verdict is (Verdict.REGRESSED)
    assert found >= 20, found  # 26 of 40 at 10 pairs; the signed-rank test: 0 of 40


def test_a_query_p_value_does_not_depend_on_the_other_queries() -> None:
    rng = np.random.default_rng(1)
    base = list(rng.uniform(1, 3, 20))
    cand = [b * r for b, r in zip(base, rng.lognormal(0.08, 0.08, 20), strict=True)]
    tied = ([0.05] * 20, [0.05, 0.055] + [0.06] * 18)
    alone = compare_paired_batch([(base, cand)])[0].p_value
    assert compare_paired_batch([(base, cand), tied])[0].p_value == alone


def test_a_verdict_needs_five_pairs_that_agree() -> None:
    # measured: an A/A query at 5 pairs under two CPU burners (bench/bench_detection.py)
    a = [0.805, 1.782, 3.048, 1.458, 2.537]
    b = [0.730, 1.597, 7.142, 1.326, 6.551]
    result = compare_paired(a, b)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.reason.startswith("only 3 of 5 pairs agree")
    assert result.decide_at is not None and result.decide_at > 5
    agreeing = [0.9 * x for x in (1.0, 2.0, 3.0, 1.5, 2.5)]
    more = compare_paired([*a, 1.0, 2.0, 3.0, 1.5, 2.5], [*b, *agreeing])
    assert more.verdict is Verdict.IMPROVED  # 8 of 10 agree: the test decides
