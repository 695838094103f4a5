"""detector.engine.stats on known distributions: lognormal latencies drawn from seeded generators.

Rates are measured over many independent draws and the bounds come from the statistics, not
from the draws: e.g. a REGRESSED verdict needs a significant upward move, which an A/A pair
makes with probability at most alpha / 2, so an A/A false-alarm count is bounded by that.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest
from scipy.stats import norm

from detector.engine import stats
from detector.model.comparison import TimingComparison, Verdict

MEDIAN_MS = 2.0
Pairs = list[tuple[list[float], list[float]]]


def lognormal_pairs(count: int, n: int, sigma: float, shift: float, seed: int) -> Pairs:
    """`count` independent (baseline, candidate) pairs; the candidate's median is x `shift`."""
    rng = np.random.default_rng(seed)
    base = MEDIAN_MS * np.exp(rng.normal(0.0, sigma, (count, n)))
    cand = MEDIAN_MS * shift * np.exp(rng.normal(0.0, sigma, (count, n)))
    return list(zip(base.tolist(), cand.tolist(), strict=True))


def quantile_grid(n: int, sigma: float, shift: float = 1.0) -> list[float]:
    """A noiseless stand-in for n lognormal draws: the distribution's (i + 0.5) / n quantiles."""
    quantiles = norm.ppf((np.arange(n) + 0.5) / n)
    return [MEDIAN_MS * shift * float(np.exp(sigma * z)) for z in quantiles]


def verdicts(results: Sequence[TimingComparison]) -> Counter[Verdict]:
    return Counter(r.verdict for r in results)


def significant(r: TimingComparison) -> bool:
    assert r.ci_low is not None and r.ci_high is not None and r.p_value is not None
    return (r.ci_low > 1 or r.ci_high < 1) and r.p_value < 0.05


# --- verdicts on shifted distributions ----------------------------------------------------


def test_thirty_percent_slower_is_regressed_with_a_ci_above_one() -> None:
    ((base, cand),) = lognormal_pairs(1, 30, 0.2, 1.3, seed=1)
    result = stats.compare_timings(base, cand)
    assert result.verdict is Verdict.REGRESSED
    assert result.ci_low is not None and result.ci_low > 1
    assert result.ratio is not None and result.ratio >= 1.1
    assert result.describe().startswith(f"{result.ratio:.2f}x slower (95% CI ")


def test_thirty_percent_shifts_are_caught_in_nearly_every_draw() -> None:
    # power: n=30, sigma=0.2 puts a 30% shift ~4 standard errors of the log median ratio away
    slower = stats.compare_timings_batch(lognormal_pairs(200, 30, 0.2, 1.3, seed=2))
    faster = stats.compare_timings_batch(lognormal_pairs(200, 30, 0.2, 0.7, seed=3))
    assert verdicts(slower)[Verdict.REGRESSED] >= 190
    assert verdicts(faster)[Verdict.IMPROVED] >= 190
    assert all(
        r.ci_low is not None and r.ci_low > 1 for r in slower if r.verdict is Verdict.REGRESSED
    )
    assert all(
        r.ci_high is not None and r.ci_high < 1 for r in faster if r.verdict is Verdict.IMPROVED
    )
    assert not verdicts(slower)[Verdict.IMPROVED] and not verdicts(faster)[Verdict.REGRESSED]


def test_thirty_percent_faster_is_improved() -> None:
    ((base, cand),) = lognormal_pairs(1, 30, 0.2, 0.7, seed=4)
    result = stats.compare_timings(base, cand)
    assert result.verdict is Verdict.IMPROVED
    assert result.ci_high is not None and result.ci_high < 1
    assert result.describe().startswith(f"{1 / result.ratio:.2f}x faster")  # type: ignore[operator]


def test_three_percent_is_never_a_regression_but_often_significant() -> None:
    # sigma 0.05: the 3% move is detectable, and the 10% minimum effect is what stops it
    results = stats.compare_timings_batch(lognormal_pairs(200, 30, 0.05, 1.03, seed=5))
    counts = verdicts(results)
    assert counts[Verdict.REGRESSED] == 0
    assert set(counts) <= {Verdict.UNCHANGED, Verdict.INCONCLUSIVE}
    assert sum(significant(r) for r in results) >= 40  # ~45% are significant
    assert counts[Verdict.UNCHANGED] >= 180


def test_too_few_samples_is_inconclusive_even_for_a_huge_shift() -> None:
    result = stats.compare_timings([2.0, 2.1, 1.9], [6.0, 6.3, 5.7])
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.reason == "too few samples: 3 < 5"
    assert result.ratio == pytest.approx(3.0)
    assert result.ci_low is None and result.p_value is None
    assert stats.compare_timings([], []).reason == "too few samples: 0 < 5"
    assert stats.compare_timings([2.0] * 3, [6.0] * 3, min_samples=2).verdict is not (
        Verdict.INCONCLUSIVE
    )


def test_effect_inside_the_noise_floor_is_inconclusive() -> None:
    base, cand = quantile_grid(30, 0.05), quantile_grid(30, 0.05, 1.15)
    assert stats.compare_timings(base, cand).verdict is Verdict.REGRESSED
    result = stats.compare_timings(base, cand, noise_floor=0.25)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.reason == "a change of 15% is inside the A/A noise floor of 25%"
    assert result.noise_floor == 0.25
    assert stats.compare_timings(base, cand, noise_floor=0.12).verdict is Verdict.REGRESSED


@pytest.mark.parametrize(
    ("sigma", "n", "shift", "verdict", "reason"),
    [
        (0.1, 30, 1.08, Verdict.INCONCLUSIVE, "a change of 8% is below the 10% minimum effect"),
        (0.1, 30, 1.04, Verdict.INCONCLUSIVE, "not significant (p=0.15)"),
        (0.5, 30, 1.0, Verdict.INCONCLUSIVE, "the CI is too wide to decide"),
        (0.02, 30, 1.0, Verdict.UNCHANGED, "CI within the ±10% equivalence margin"),
        (0.05, 30, 1.3, Verdict.REGRESSED, "significant (p=3e-11) and 30% >= 10%"),
    ],
)
def test_one_line_reasons(
    sigma: float, n: int, shift: float, verdict: Verdict, reason: str
) -> None:
    result = stats.compare_timings(quantile_grid(n, sigma), quantile_grid(n, sigma, shift))
    assert (result.verdict, result.reason) == (verdict, reason)
    assert result.min_effect == 0.10 and result.noise_floor is None


# --- A/A: the gate must not cry wolf ------------------------------------------------------


def test_aa_at_typical_noise_never_regresses() -> None:
    results = stats.compare_timings_batch(lognormal_pairs(200, 30, 0.05, 1.0, seed=6))
    counts = verdicts(results)
    merely_significant = sum(significant(r) for r in results)
    print(f"A/A sigma=0.05 n=30 x200: {dict(counts)}; significant {merely_significant}")
    assert counts[Verdict.REGRESSED] == 0 and counts[Verdict.IMPROVED] == 0
    assert 1 <= merely_significant <= 20  # near alpha = 5% of 200 (both tests must agree)
    assert counts[Verdict.UNCHANGED] >= 190  # CI +-3% fits in the 10% margin


def test_aa_false_alarm_rate_at_high_noise_is_bounded_by_alpha() -> None:
    # sigma=0.2, n=30: the median ratio's standard error is ~6.5%, so a 10% minimum effect is
    # only 1.5 SE: some significant A/A moves exceed it. The rate is bounded by alpha / 2.
    pairs = lognormal_pairs(2000, 30, 0.2, 1.0, seed=7)
    results = stats.compare_timings_batch(pairs)
    counts = verdicts(results)
    merely_significant = sum(significant(r) for r in results)
    print(f"A/A sigma=0.2 n=30 x2000: {dict(counts)}; significant {merely_significant}")
    assert counts[Verdict.REGRESSED] <= 2000 * 0.025
    assert counts[Verdict.REGRESSED] + counts[Verdict.IMPROVED] <= merely_significant <= 150
    # the A/A noise floor measured on an independent A/A pair per query lifts the threshold
    floors = aa_noise_floors(lognormal_pairs(2000, 30, 0.2, 1.0, seed=8))
    gated = stats.compare_timings_batch(pairs, noise_floor=floors)
    gated_counts = verdicts(gated)
    print(f"  with per-query A/A noise floors: {dict(gated_counts)}")
    assert gated_counts[Verdict.REGRESSED] < counts[Verdict.REGRESSED] / 4


def aa_noise_floors(aa_pairs: Pairs) -> list[float]:
    """`noise_floor` of many A/A pairs at once, from the batch's CIs."""
    return [
        max(r.ci_high, 1 / r.ci_low) - 1  # type: ignore[operator,type-var]
        for r in stats.compare_timings_batch(aa_pairs)
    ]


def test_per_pair_noise_floors() -> None:
    aa = lognormal_pairs(20, 30, 0.2, 1.0, seed=14)
    floors = aa_noise_floors(aa)
    assert floors == [stats.noise_floor(a, b) for a, b in aa]
    base, cand = quantile_grid(30, 0.05), quantile_grid(30, 0.05, 1.15)
    results = stats.compare_timings_batch([(base, cand)] * 3, noise_floor=[None, 0.25, 0.12])
    assert [r.verdict for r in results] == [
        Verdict.REGRESSED,
        Verdict.INCONCLUSIVE,
        Verdict.REGRESSED,
    ]
    assert [r.noise_floor for r in results] == [None, 0.25, 0.12]
    with pytest.raises(ValueError):
        stats.compare_timings_batch([(base, cand)] * 3, noise_floor=[0.1, 0.2])


def test_heavy_tails_do_not_flip_an_aa_to_regressed() -> None:
    rng = np.random.default_rng(9)
    base = MEDIAN_MS * np.exp(rng.normal(0.0, 0.05, (200, 30)))
    cand = MEDIAN_MS * np.exp(rng.normal(0.0, 0.05, (200, 30)))
    for side in (base, cand):  # 1 run in 10 hits a checkpoint: 10x slower, on both sides
        side[rng.random(side.shape) < 0.1] *= 10
    mean_ratios = cand.mean(axis=1) / base.mean(axis=1)
    assert np.mean(np.abs(mean_ratios - 1) > 0.10) > 0.4  # means would cry wolf constantly
    results = stats.compare_timings_batch(list(zip(base.tolist(), cand.tolist(), strict=True)))
    assert verdicts(results)[Verdict.REGRESSED] == 0
    # a few outliers landing on the candidate side only
    clean = quantile_grid(30, 0.05)
    spiky = [*clean[:27], *(x * 10 for x in clean[27:])]
    assert stats.compare_timings(clean, spiky).verdict is not Verdict.REGRESSED
    assert np.mean(spiky) / np.mean(clean) > 1.5


# --- edge cases -----------------------------------------------------------------------------


def test_zero_negative_and_non_finite_timings_do_not_crash() -> None:
    zeros = stats.compare_timings([0.0] * 10, [1.0] * 10)
    assert zeros.verdict is Verdict.INCONCLUSIVE and zeros.ratio is None
    assert zeros.reason == "non-positive baseline median"
    negative = stats.compare_timings([1.0] * 10, [-1.0] * 10)
    assert negative.reason == "non-positive candidate median"
    nan = stats.compare_timings([1.0] * 9 + [float("nan")], [1.0] * 10)
    assert nan.reason == "non-finite timing values"
    # zeros and negatives inside a sample with a positive median are just small values
    mixed = stats.compare_timings([0.0, -0.001, 2, 2, 2, 2.1, 2.2], [0.0, 0.0, 0.0, 2, 2, 2, 9])
    assert mixed.ci_low is not None and mixed.ci_high is not None
    assert 0 < mixed.ci_low <= mixed.ci_high < float("inf")
    same = stats.compare_timings([1.0] * 10, [1.0] * 10)
    assert (same.verdict, same.ratio, same.ci_low, same.p_value) == (
        Verdict.UNCHANGED,
        1.0,
        1.0,
        1.0,
    )


def test_bad_options_are_refused() -> None:
    for options in (
        {"alpha": 0},
        {"min_samples": 0},
        {"noise_floor": -0.1},
        {"min_effect": float("nan")},
        {"resamples": 0},
    ):
        with pytest.raises(ValueError):
            stats.compare_timings([1.0] * 5, [1.0] * 5, **options)
    with pytest.raises(ValueError):
        stats.percentile([], 50)
    with pytest.raises(ValueError):
        stats.percentile([1.0], 101)
    with pytest.raises(ValueError):
        stats.median_ratio([0.0, 0.0, 1.0], [1.0])


# --- primitives against their references --------------------------------------------------


def test_percentile_and_timing_stats_match_numpy() -> None:
    rng = np.random.default_rng(10)
    for _ in range(300):
        values = rng.lognormal(0.5, 1.0, int(rng.integers(1, 60))).tolist()
        for q in (0.0, 100.0, 50.0, 90.0, 99.0, float(rng.uniform(0, 100))):
            assert stats.percentile(values, q) == pytest.approx(
                np.percentile(values, q), rel=1e-12, abs=0
            )
        summary = stats.timing_stats(values)
        assert summary.n == len(values) and summary.median_ms == np.median(values)
        assert summary.p90_ms == pytest.approx(np.percentile(values, 90), rel=1e-12)
        assert (summary.min_ms, summary.max_ms) == (min(values), max(values))


def test_median_ratio() -> None:
    assert stats.median_ratio([1.0, 2.0, 3.0], [4.0, 4.0, 5.0, 100.0]) == 2.25


def test_bootstrap_is_deterministic_and_ignores_sample_order() -> None:
    ((base, cand),) = lognormal_pairs(1, 30, 0.2, 1.1, seed=11)
    ci = stats.bootstrap_ratio_ci(base, cand, seed=3)
    assert ci == stats.bootstrap_ratio_ci(base, cand, seed=3)
    assert ci == stats.bootstrap_ratio_ci(sorted(base, reverse=True), cand[::-1], seed=3)
    assert ci != stats.bootstrap_ratio_ci(base, cand, seed=4)
    assert ci[0] < stats.median_ratio(base, cand) < ci[1]
    floor = stats.noise_floor(base, cand, seed=3)
    assert floor == max(ci[1], 1 / ci[0]) - 1 and floor > 0


def random_pairs(count: int, seed: int) -> Pairs:
    """Mixed sizes (odd, even, tiny), spreads and shifts, some rounded so that values tie."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(count):
        n_b, n_c = (int(x) for x in rng.choice([3, 5, 6, 7, 8, 9, 10, 13, 30], 2))
        sigma, shift = rng.uniform(0.01, 0.6), rng.choice([0.7, 0.9, 1.0, 1.05, 1.2, 1.5])
        base = MEDIAN_MS * np.exp(rng.normal(0, sigma, n_b))
        cand = MEDIAN_MS * shift * np.exp(rng.normal(0, sigma, n_c))
        digits = int(rng.choice([1, 2, 6]))
        pairs.append((np.round(base, digits).tolist(), np.round(cand, digits).tolist()))
    return pairs


@pytest.mark.parametrize("resamples", [1, 10, 99, 2000])
def test_batch_bootstrap_equals_the_direct_bootstrap(resamples: int) -> None:
    """The batch's shortcuts (medians read off sorted samples, pruned cells) change nothing."""
    for base, cand in random_pairs(100, seed=resamples):
        result = stats.compare_timings(base, cand, min_samples=3, resamples=resamples, seed=7)
        assert (result.ci_low, result.ci_high) == pytest.approx(
            stats.bootstrap_ratio_ci(base, cand, resamples=resamples, seed=7), rel=1e-12
        )


def test_batch_mann_whitney_chooses_exact_or_asymptotic_per_pair() -> None:
    # pairs with <= 8 samples: scipy's batch 'auto' would use one method for all of them
    pairs = [
        ([1.0, 2, 3, 4, 5], [6.0, 7, 8, 9, 10]),
        ([1.0, 2, 3, 4, 5], [5.0, 7, 8, 9, 10]),
        *random_pairs(200, seed=12),
    ]
    results = stats.compare_timings_batch(pairs, min_samples=3)
    for (base, cand), result in zip(pairs, results, strict=True):
        assert result.p_value == pytest.approx(stats.mann_whitney_p(base, cand), rel=1e-12)
    assert results[0].p_value != results[1].p_value


def test_batch_verdicts_equal_scalar_verdicts_in_any_order() -> None:
    pairs = random_pairs(300, seed=13)
    batch = stats.compare_timings_batch(pairs, min_samples=4, noise_floor=0.05, seed=1)
    scalar = [
        stats.compare_timings(b, c, min_samples=4, noise_floor=0.05, seed=1) for b, c in pairs
    ]
    assert batch == scalar
    assert len(verdicts(batch)) == 4  # every verdict occurs, so the equality is not vacuous
    order = list(range(len(pairs)))
    random.Random(0).shuffle(order)
    shuffled = stats.compare_timings_batch(
        [pairs[i] for i in order], min_samples=4, noise_floor=0.05, seed=1
    )
    assert shuffled == [batch[i] for i in order]
