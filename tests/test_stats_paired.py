"""Paired statistics: A/A and known-effect distributions, pairing order, the bootstrap's
shortcut against the direct computation, false discovery control and noise floors."""

from __future__ import annotations

import numpy as np
import pytest

from detector.engine import stats
from detector.engine.stats_paired import (
    _plan,
    compare_paired,
    compare_paired_batch,
    paired_log_ratios,
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
    assert (a.ratio, a.ci_low, a.ci_high, a.p_value) == (b.ratio, b.ci_low, b.ci_high, b.p_value)
    flipped = compare_paired(cand, base)
    assert flipped.ratio == pytest.approx(1 / a.ratio)  # type: ignore[operator]
    assert flipped.verdict is Verdict.IMPROVED and a.verdict is Verdict.REGRESSED


def test_the_batch_equals_one_by_one() -> None:
    rng = np.random.default_rng(9)
    pairs = [varied(rng, n, e) for n in (6, 10, 10, 25) for e in (1.0, 1.12, 1.4)]
    assert compare_paired_batch(pairs) == [compare_paired(b, c) for b, c in pairs]


@pytest.mark.parametrize("n", [5, 10, 11, 30])
def test_the_bootstrap_shortcut_equals_resampling_directly(n: int) -> None:
    rng = np.random.default_rng(n)
    base, cand = varied(rng, n, 1.1)
    logs = np.sort(paired_log_ratios(base, cand))
    idx = np.random.default_rng(0).integers(0, n, (2000, n))
    direct = np.exp(np.quantile(np.median(logs[idx], axis=1), [0.025, 0.975]))
    result = compare_paired(base, cand)
    assert (result.ci_low, result.ci_high) == pytest.approx(tuple(direct), rel=1e-12)
    combos, weights = _plan(n, 2000, 0)
    assert weights.sum() == 2000 and len(combos) < 2000


def test_false_discovery_control_across_many_queries() -> None:
    rng = np.random.default_rng(21)
    noisy = [
        (b.tolist(), (b * rng.lognormal(0, 0.4, 6)).tolist())
        for b in (rng.uniform(1, 2, 6) for _ in range(2000))
    ]
    alone = compare_paired_batch(noisy, min_effect=0.0)
    controlled = stats.control_false_discoveries(alone)
    flagged = [r for r in alone if r.verdict in (Verdict.REGRESSED, Verdict.IMPROVED)]
    assert flagged, "without control some A/A queries come out significant"
    assert not [r for r in controlled if r.verdict in (Verdict.REGRESSED, Verdict.IMPROVED)]
    demoted = next(r for r in controlled if r.reason.startswith("p="))
    assert "false discovery control" in demoted.reason and demoted.q_value is not None
    real = compare_paired_batch([varied(rng, 20, 1.5)])
    kept = stats.control_false_discoveries(real + alone[:50])
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


def test_the_trimmed_test_matches_its_textbook_form() -> None:
    from scipy.stats import mstats, trim_mean
    from scipy.stats import t as student

    from detector.engine.stats_paired import trimmed_t_p

    rng = np.random.default_rng(4)
    rows = np.sort(rng.normal(0.05, 0.2, (50, 11)), axis=1)
    expected = []
    for row in rows:
        g, kept = 2, 11 - 4
        winsorized = np.asarray(mstats.winsorize(row, limits=(0.2, 0.2)))
        se = np.sqrt(winsorized.var(ddof=1) * 10 / (kept * (kept - 1)))
        expected.append(2 * student.sf(abs(trim_mean(row, 0.2)) / se, kept - 1))
        assert g == int(0.2 * 11)
    assert trimmed_t_p(rows) == pytest.approx(expected, rel=1e-9)


def test_one_descheduled_execution_does_not_veto_a_clear_effect() -> None:
    ratios = [1.34, 1.39, 1.29, 1.24, 1.26, 1.16, 0.51, 1.36, 1.35, 1.29]
    result = compare_paired([1.0] * 10, ratios)
    assert result.verdict is Verdict.REGRESSED
    assert result.p_value is not None and result.p_value < 0.001


@pytest.mark.parametrize("n", [5, 10, 20])
def test_under_a_a_the_test_keeps_its_level_on_a_loaded_machine(n: int) -> None:
    rng = np.random.default_rng(n + 100)
    pairs = [preempted(rng, n, 1.0) for _ in range(3000)]
    p = np.array([r.p_value for r in compare_paired_batch(pairs, min_effect=0.0)], np.float64)
    assert (p < 0.05).mean() < 0.065
    flagged = compare_paired_batch(pairs)  # with the 10% minimum effect
    assert sum(r.verdict in (Verdict.REGRESSED, Verdict.IMPROVED) for r in flagged) <= 3


def test_a_lone_regression_survives_false_discovery_control_on_a_loaded_machine() -> None:
    rng = np.random.default_rng(77)
    found = 0
    for _ in range(40):
        batch = [preempted(rng, 10, 1.0) for _ in range(27)] + [preempted(rng, 10, 1.3)]
        found += stats.control_false_discoveries(compare_paired_batch(batch))[-1].verdict is (
            Verdict.REGRESSED
        )
    assert found >= 20, found  # 26 of 40 at 10 pairs; the signed-rank test: 0 of 40


def test_a_query_p_value_does_not_depend_on_the_other_queries() -> None:
    rng = np.random.default_rng(1)
    base = list(rng.uniform(1, 3, 20))
    cand = [b * r for b, r in zip(base, rng.lognormal(0.08, 0.08, 20), strict=True)]
    tied = ([0.05] * 20, [0.05, 0.055] + [0.06] * 18)
    alone = compare_paired_batch([(base, cand)])[0].p_value
    assert compare_paired_batch([(base, cand), tied])[0].p_value == alone
