"""Timing statistics behind planshift's verdicts: median ratio, bootstrap CI, Mann-Whitney U.

Why not a t-test on means? Query latencies are skewed and heavy-tailed: a checkpoint, an
autovacuum or one cold page turns a 2 ms run into 20 ms. A mean follows that one outlier, and
a t-test's normal approximation does not hold at the 5-30 runs a CI job can afford. Seed 002
is the reminder: averages hide variability, compare distributions. So, per query:

* the effect is the ratio of medians (candidate / baseline, > 1 is slower): robust to a few
  outliers and scale-free, so one threshold fits a 0.1 ms lookup and a 10 s report;
* its uncertainty is a percentile bootstrap CI of that ratio (no distributional assumption);
* a rank test (Mann-Whitney U, two-sided) must agree, so neither one decides alone;
* significant is not important: the effect must also reach a minimum (default 10%) and the
  A/A noise floor, the spread seen when a target is compared with itself, which captures
  noise the samples do not show (drift, neighbours, CPU frequency);
* "unchanged" is an equivalence claim: the whole CI lies within the threshold. Anything else
  is "inconclusive" with a one-line reason. Too few samples is inconclusive, never a verdict.

Seeds: the bootstrap resample plan (which indices each resample draws) comes from
``numpy.random.default_rng(seed)`` and depends only on (seed, len(baseline), len(candidate),
resamples), never on the data nor on a pair's position in a batch. A pair therefore gets the
same CI from `compare_timings` and `compare_timings_batch`, in any order, on every run
(`compare_timings` is the batch of one). The batch shares one plan across pairs of equal
sizes and uses that the median of x[idx] is read off sorted(x) at the middle positions of
sorted(idx): each resampled median costs two lookups, not a sort. `bootstrap_ratio_ci` is the
direct form (gather, median, quantile) of the same bootstrap; the tests check they agree.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from detector.model.comparison import TimingComparison, TimingStats, Verdict

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
CONFIDENCE = 0.95  # of the CI behind every verdict (TimingComparison.describe says "95% CI")
FLOOR_MS = 1e-9  # resampled medians are floored here (1 ps: "zero"), so ratios stay finite
_CHUNK_CELLS = 2_000_000  # resampled ratios held at once (16 MB of float64)


def _sample(values: Sequence[float], what: str) -> Floats:
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError(f"{what} of an empty sample")
    return x


def _lerp_rows(xs: Floats, p: float) -> Floats:
    """numpy's default (linear) quantile p of each row; rows sorted or partitioned there."""
    pos = p * (xs.shape[1] - 1)
    lo = math.floor(pos)
    hi, t = min(lo + 1, xs.shape[1] - 1), pos - lo
    a, b = xs[:, lo], xs[:, hi]
    return np.asarray(b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t, np.float64)


def _median_rows(xs: Floats) -> Floats:
    """Median of each row of a row-sorted array, computed exactly as np.median does."""
    n = xs.shape[1]
    return (xs[:, (n - 1) // 2] + xs[:, n // 2]) / 2


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (q in [0, 100]) with linear interpolation, as numpy's default."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    xs = np.sort(_sample(values, "percentile"))
    return float(_lerp_rows(xs[None, :], q / 100)[0])


def timing_stats(values: Sequence[float]) -> TimingStats:
    """n, median, p90, p99, min and max of one side's durations (ms)."""
    xs = np.sort(_sample(values, "timing_stats"))[None, :]
    return TimingStats(
        n=xs.shape[1], median_ms=float(_median_rows(xs)[0]),
        p90_ms=float(_lerp_rows(xs, 0.9)[0]), p99_ms=float(_lerp_rows(xs, 0.99)[0]),
        min_ms=float(xs[0, 0]), max_ms=float(xs[0, -1]),
    )


def median_ratio(baseline: Sequence[float], candidate: Sequence[float]) -> float:
    """median(candidate) / median(baseline); > 1 means the candidate is slower."""
    b, c = _sample(baseline, "median_ratio"), _sample(candidate, "median_ratio")
    return _positive_median(c, "candidate") / _positive_median(b, "baseline")


def _positive_median(x: Floats, side: str) -> float:
    median = float(np.median(x))
    if not median > 0:
        raise ValueError(f"the {side} median is {median} ms; a ratio needs a positive median")
    return median


def _resample_plan(n_b: int, n_c: int, resamples: int, seed: int) -> tuple[Ints, Ints]:
    """Indices drawn by each resample; a function of the sizes and the seed only."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_b, (resamples, n_b)), rng.integers(0, n_c, (resamples, n_c))


def bootstrap_ratio_ci(
    baseline: Sequence[float], candidate: Sequence[float], *,
    resamples: int = 2000, confidence: float = CONFIDENCE, seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap CI of the median ratio; the same seed gives the same interval."""
    b, c = _sample(baseline, "bootstrap"), _sample(candidate, "bootstrap")
    _positive_median(b, "baseline"), _positive_median(c, "candidate")
    if not 0 < confidence < 1 or resamples < 1:
        raise ValueError("need 0 < confidence < 1 and resamples >= 1")
    idx_b, idx_c = _resample_plan(b.size, c.size, resamples, seed)
    med_b = np.maximum(np.median(b[idx_b], axis=1), FLOOR_MS)
    ratios = np.maximum(np.median(c[idx_c], axis=1), FLOOR_MS) / med_b
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return float(low), float(high)


def mann_whitney_p(baseline: Sequence[float], candidate: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value (scipy's automatic exact / asymptotic choice)."""
    b, c = _sample(baseline, "mann_whitney_p"), _sample(candidate, "mann_whitney_p")
    return float(sps.mannwhitneyu(b, c, alternative="two-sided").pvalue)


def noise_floor(
    first: Sequence[float], second: Sequence[float], *, resamples: int = 2000, seed: int = 0,
) -> float:
    """How far from 1.0 the median-ratio CI of an A/A pair reaches: 0.07 means 7%."""
    low, high = bootstrap_ratio_ci(first, second, resamples=resamples, seed=seed)
    return max(high, 1 / low) - 1


@dataclass(frozen=True)
class _Options:
    min_effect: float
    alpha: float
    min_samples: int
    noise_floor: float | None
    resamples: int
    seed: int

    def __post_init__(self) -> None:
        if self.min_effect < 0 or not 0 < self.alpha < 1 or self.min_samples < 1:
            raise ValueError("need min_effect >= 0, 0 < alpha < 1 and min_samples >= 1")
        if (self.noise_floor is not None and self.noise_floor < 0) or self.resamples < 1:
            raise ValueError("need noise_floor >= 0 (or None) and resamples >= 1")

    @property
    def threshold(self) -> float:
        return max(self.min_effect, self.noise_floor or 0.0)


def compare_timings(
    baseline: Sequence[float], candidate: Sequence[float], *, min_effect: float = 0.10,
    alpha: float = 0.05, min_samples: int = 5, noise_floor: float | None = None,
    resamples: int = 2000, seed: int = 0,
) -> TimingComparison:
    """Verdict for one query: regressed / improved / unchanged / inconclusive, with the reason."""
    return compare_timings_batch(
        [(baseline, candidate)], min_effect=min_effect, alpha=alpha, min_samples=min_samples,
        noise_floor=noise_floor, resamples=resamples, seed=seed,
    )[0]


def compare_timings_batch(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]], *, min_effect: float = 0.10,
    alpha: float = 0.05, min_samples: int = 5, noise_floor: float | None = None,
    resamples: int = 2000, seed: int = 0,
) -> list[TimingComparison]:
    """`compare_timings` for many (baseline, candidate) pairs at once, in input order."""
    opts = _Options(min_effect, alpha, min_samples, noise_floor, resamples, seed)
    groups: defaultdict[tuple[int, int], list[int]] = defaultdict(list)
    for i, (b, c) in enumerate(pairs):
        groups[(len(b), len(c))].append(i)
    results: dict[int, TimingComparison] = {}
    for (n_b, n_c), members in groups.items():
        b_rows = np.array([pairs[i][0] for i in members], dtype=np.float64)
        c_rows = np.array([pairs[i][1] for i in members], dtype=np.float64)
        shape_b, shape_c = (len(members), n_b), (len(members), n_c)
        verdicts = _compare_group(b_rows.reshape(shape_b), c_rows.reshape(shape_c), opts)
        results.update(zip(members, verdicts, strict=True))
    return [results[i] for i in range(len(pairs))]


def _compare_group(b: Floats, c: Floats, opts: _Options) -> list[TimingComparison]:
    """All pairs with the same (len(baseline), len(candidate))."""
    count, n_b, n_c = b.shape[0], b.shape[1], c.shape[1]
    finite = np.asarray(np.isfinite(b).all(axis=1) & np.isfinite(c).all(axis=1), np.bool_)
    b_sorted, c_sorted = np.sort(b, axis=1), np.sort(c, axis=1)
    med_b = _median_rows(b_sorted) if n_b else np.full(count, np.nan)
    med_c = _median_rows(c_sorted) if n_c else np.full(count, np.nan)
    positive = finite & (med_b > 0) & (med_c > 0)
    ratio = np.where(positive, med_c / np.where(positive, med_b, 1.0), np.nan)
    ok = positive & (min(n_b, n_c) >= opts.min_samples)
    low, high, p = np.full(count, np.nan), np.full(count, np.nan), np.full(count, np.nan)
    if ok.any():
        low[ok], high[ok] = _bootstrap_rows(b_sorted[ok], c_sorted[ok], opts)
        p[ok] = _mann_whitney_rows(b[ok], c[ok])
    out = []
    for i, (r, lo, hi, pv) in enumerate(zip(ratio.tolist(), low.tolist(), high.tolist(),
                                             p.tolist(), strict=True)):
        if not finite[i]:
            verdict, reason = Verdict.INCONCLUSIVE, "non-finite timing values"
        elif min(n_b, n_c) < opts.min_samples:
            verdict, reason = Verdict.INCONCLUSIVE, (
                f"too few samples: {min(n_b, n_c)} < {opts.min_samples}")
        elif not positive[i]:
            side, med = ("baseline", med_b[i]) if not med_b[i] > 0 else ("candidate", med_c[i])
            verdict, reason = Verdict.INCONCLUSIVE, f"non-positive {side} median ({med:g} ms)"
        else:
            verdict, reason = _decide(r, lo, hi, pv, opts)
        done = ok[i]
        out.append(TimingComparison(
            verdict=verdict, ratio=r if positive[i] else None, ci_low=lo if done else None,
            ci_high=hi if done else None, p_value=pv if done else None,
            min_effect=opts.min_effect, noise_floor=opts.noise_floor, reason=reason))
    return out


def _bootstrap_rows(b_sorted: Floats, c_sorted: Floats, opts: _Options) -> tuple[Floats, Floats]:
    """Per-row percentile bootstrap CI of the median ratio, from row-sorted samples."""
    idx_b, idx_c = _resample_plan(b_sorted.shape[1], c_sorted.shape[1], opts.resamples, opts.seed)
    idx_b.sort(axis=1)
    idx_c.sort(axis=1)
    (n_b, n_c), count, resamples = (idx_b.shape[1], idx_c.shape[1]), len(b_sorted), opts.resamples
    tail = (1 - CONFIDENCE) / 2
    kth = sorted({min(math.floor(q * (resamples - 1)) + d, resamples - 1)
                  for q in (tail, 1 - tail) for d in (0, 1)})
    low, high = np.empty(count), np.empty(count)
    step = max(1, _CHUNK_CELLS // resamples)
    for s in range(0, count, step):
        b, c = b_sorted[s:s + step], c_sorted[s:s + step]
        med_b = (b[:, idx_b[:, (n_b - 1) // 2]] + b[:, idx_b[:, n_b // 2]]) / 2
        ratios = (c[:, idx_c[:, (n_c - 1) // 2]] + c[:, idx_c[:, n_c // 2]]) / 2
        np.maximum(ratios, FLOOR_MS, out=ratios)
        ratios /= np.maximum(med_b, FLOOR_MS, out=med_b)
        ratios.partition(kth, axis=1)
        low[s:s + step], high[s:s + step] = _lerp_rows(ratios, tail), _lerp_rows(ratios, 1 - tail)
    return low, high


def _mann_whitney_rows(b: Floats, c: Floats) -> Floats:
    """Row-wise `mann_whitney_p`: scipy's 'auto' looks for ties in the whole batch, so the
    exact / asymptotic choice is made here per row, as it would be for that pair alone."""
    if min(b.shape[1], c.shape[1]) > 8:
        return np.asarray(sps.mannwhitneyu(b, c, axis=1, method="asymptotic").pvalue, np.float64)
    joint = np.sort(np.concatenate((b, c), axis=1), axis=1)
    ties = (joint[:, 1:] == joint[:, :-1]).any(axis=1)
    p = np.empty(len(b))
    methods: tuple[tuple[Bools, Literal["asymptotic", "exact"]], ...] = (
        (ties, "asymptotic"), (~ties, "exact"))
    for rows, method in methods:
        if rows.any():
            result = sps.mannwhitneyu(b[rows], c[rows], axis=1, method=method)
            p[rows] = np.asarray(result.pvalue, np.float64)
    return p


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.3g}%"


def _decide(ratio: float, low: float, high: float, p: float, opts: _Options) -> tuple[Verdict, str]:
    threshold, effect = opts.threshold, max(ratio, 1 / ratio) - 1
    slower, faster = low > 1, high < 1
    significant = (slower or faster) and p < opts.alpha
    if significant and effect >= threshold and (ratio > 1) == slower:
        verdict = Verdict.REGRESSED if slower else Verdict.IMPROVED
        return verdict, f"significant (p={p:.2g}) and {_pct(effect)} >= {_pct(threshold)}"
    if low >= 1 / (1 + threshold) and high <= 1 + threshold:
        return Verdict.UNCHANGED, f"CI within the ±{_pct(threshold)} equivalence margin"
    if significant and effect < threshold:
        if opts.noise_floor is not None and effect >= opts.min_effect:
            why = f"inside the A/A noise floor of {_pct(opts.noise_floor)}"
        else:
            why = f"below the {_pct(opts.min_effect)} minimum effect"
        return Verdict.INCONCLUSIVE, f"{ratio:.2f}x is {why}"
    if significant:
        return Verdict.INCONCLUSIVE, f"median ratio {ratio:.2f}x is outside its CI"
    if low < 1 / (1 + threshold) and high > 1 + threshold:
        return Verdict.INCONCLUSIVE, f"CI {low:.2f}-{high:.2f} too wide to decide"
    if p >= opts.alpha:
        return Verdict.INCONCLUSIVE, f"not significant (p={p:.2g})"
    return Verdict.INCONCLUSIVE, f"not significant (CI {low:.2f}-{high:.2f} includes 1)"
