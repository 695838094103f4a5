"""Timing statistics behind planshift's verdicts: median ratio, bootstrap CI, Mann-Whitney U.

Why not a t-test on means? Query latencies are skewed and heavy-tailed: a checkpoint, an
autovacuum or one cold page turns a 2 ms run into 20 ms. A mean follows that one outlier, and
a t-test's normal approximation does not hold at the 5-30 runs a CI job can afford. Seed 002:
averages hide variability, compare distributions. So, per query:

* the effect is the ratio of medians (candidate / baseline, > 1 is slower): robust to a few
  outliers and scale-free, so one threshold fits a 0.1 ms lookup and a 10 s report;
* its uncertainty is a percentile bootstrap CI (no distributional assumption), and a rank
  test (Mann-Whitney U, two-sided) must agree with it;
* significant is not important: the effect must also reach a minimum (default 10%) and the
  A/A noise floor (a target compared with itself), noise the samples alone do not show;
* "unchanged" is an equivalence claim (the whole CI within the threshold); anything else is
  "inconclusive" with a one-line reason. Too few samples is inconclusive, never a verdict.

Seeds: the resample plan (which indices each resample draws) comes from default_rng(seed)
and depends only on (seed, len(baseline), len(candidate), resamples); samples are sorted
first. So a pair gets the same CI alone or in a batch, in any order, on every run
(`compare_timings` is the batch of one). The batch reads each resampled median off the
sorted sample at two positions fixed by the plan, and sorts only the resample cells that
can reach a CI bound; `bootstrap_ratio_ci` is the direct form, and the tests check they agree.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from detector.engine.quantiles import lerp, percentile, timing_stats
from detector.engine.quantiles import median_rows as _median_rows
from detector.engine.quantiles import sorted_sample as _sample
from detector.model.bulk import builder
from detector.model.comparison import TimingComparison, Verdict

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
CONFIDENCE = 0.95  # of the CI behind every verdict (TimingComparison.describe says "95% CI")
FLOOR_MS = 1e-9  # resampled medians are floored here (1 ps: "zero"), so ratios stay finite
_TAIL = (1 - CONFIDENCE) / 2
_CHUNK_VALUES = 20_000  # timings per batch chunk: a ~15 MB working set, cache-friendly
new_timing_comparison = builder(TimingComparison)
__all__ = ["lerp", "percentile", "timing_stats"]  # defined in `quantiles`, used from here too


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
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    resamples: int = 2000,
    confidence: float = CONFIDENCE,
    seed: int = 0,
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
    first: Sequence[float],
    second: Sequence[float],
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> float:
    """How far from 1.0 the median-ratio CI of an A/A pair reaches: 0.07 means 7%."""
    low, high = bootstrap_ratio_ci(first, second, resamples=resamples, seed=seed)
    return max(high, 1 / low) - 1


@dataclass(frozen=True)
class Options:
    min_effect: float
    alpha: float
    min_samples: int
    resamples: int
    seed: int

    def __post_init__(self) -> None:
        if not (
            self.min_effect >= 0
            and 0 < self.alpha < 1
            and self.min_samples >= 1
            and self.resamples >= 1
        ):
            raise ValueError("need min_effect >= 0, 0 < alpha < 1, min_samples, resamples >= 1")


def compare_timings(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    min_effect: float = 0.10,
    alpha: float = 0.05,
    min_samples: int = 5,
    noise_floor: float | None = None,
    resamples: int = 2000,
    seed: int = 0,
) -> TimingComparison:
    """Verdict for one query: regressed / improved / unchanged / inconclusive, with the reason."""
    return compare_timings_batch(
        [(baseline, candidate)],
        min_effect=min_effect,
        alpha=alpha,
        min_samples=min_samples,
        noise_floor=noise_floor,
        resamples=resamples,
        seed=seed,
    )[0]


def compare_timings_batch(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    *,
    min_effect: float = 0.10,
    alpha: float = 0.05,
    min_samples: int = 5,
    noise_floor: float | Sequence[float | None] | None = None,
    resamples: int = 2000,
    seed: int = 0,
) -> list[TimingComparison]:
    """`compare_timings` for many (baseline, candidate) pairs at once, in input order;
    `noise_floor` is one value for every pair, or one per pair (None: no floor)."""
    opts = Options(min_effect, alpha, min_samples, resamples, seed)
    floors = (
        list(noise_floor)
        if noise_floor is not None and not isinstance(noise_floor, int | float)
        else [noise_floor] * len(pairs)
    )
    if len(floors) != len(pairs) or not all(f is None or f >= 0 for f in floors):
        raise ValueError("noise_floor: None or >= 0, for all pairs or one per pair")
    groups: defaultdict[tuple[int, int], list[int]] = defaultdict(list)
    for i, (b, c) in enumerate(pairs):
        groups[(len(b), len(c))].append(i)
    results: dict[int, TimingComparison] = {}
    for (n_b, n_c), group in groups.items():
        step = max(1, _CHUNK_VALUES // (n_b + n_c + 1))  # bounds the memory held at once
        for members in (group[s : s + step] for s in range(0, len(group), step)):
            b_rows = np.array([pairs[i][0] for i in members], np.float64).reshape(len(members), n_b)
            c_rows = np.array([pairs[i][1] for i in members], np.float64).reshape(len(members), n_c)
            verdicts = _compare_group(b_rows, c_rows, [floors[i] for i in members], opts)
            results.update(zip(members, verdicts, strict=True))
    return [results[i] for i in range(len(pairs))]


def _compare_group(
    b: Floats,
    c: Floats,
    floors: list[float | None],
    opts: Options,
) -> list[TimingComparison]:
    """All pairs with the same (len(baseline), len(candidate))."""
    count, n_b, n_c = b.shape[0], b.shape[1], c.shape[1]
    finite = np.asarray(np.isfinite(b).all(axis=1) & np.isfinite(c).all(axis=1), np.bool_)
    b_sorted, c_sorted = np.sort(b, axis=1), np.sort(c, axis=1)
    med_b = _median_rows(b_sorted) if n_b else np.full(count, np.nan)
    med_c = _median_rows(c_sorted) if n_c else np.full(count, np.nan)
    positive = finite & (med_b > 0) & (med_c > 0)
    ratio = np.where(positive, med_c / np.where(positive, med_b, 1.0), np.nan)
    few_samples = min(n_b, n_c) < opts.min_samples
    ok = positive & (not few_samples)
    low, high, p = np.full(count, np.nan), np.full(count, np.nan), np.full(count, np.nan)
    if ok.any():
        low[ok], high[ok] = _bootstrap_rows(b_sorted[ok], c_sorted[ok], opts)
        p[ok] = _mann_whitney_rows(b[ok], c[ok])
    few = f"too few samples: {min(n_b, n_c)} < {opts.min_samples}"
    out = []
    rows = zip(ratio.tolist(), low.tolist(), high.tolist(), p.tolist(), strict=True)
    for i, (r, lo, hi, pv) in enumerate(rows):
        if ok[i]:
            verdict, reason = decide(r, lo, hi, pv, opts, floors[i])
        else:
            side = "candidate" if med_b[i] > 0 else "baseline"
            verdict, reason = (
                Verdict.INCONCLUSIVE,
                (
                    "non-finite timing values"
                    if not finite[i]
                    else few
                    if few_samples
                    else f"non-positive {side} median"
                ),
            )
        out.append(
            new_timing_comparison(
                verdict,
                r if positive[i] else None,
                lo if ok[i] else None,
                hi if ok[i] else None,
                pv if ok[i] else None,
                opts.min_effect,
                floors[i],
                reason,
                False,
                None,
                None,
            )
        )
    return out


class _Tail(NamedTuple):  # one CI bound: the cells that can reach it, the ranks to read
    cell_b: Ints
    cell_c: Ints
    weights: Ints
    ranks: tuple[int, int]  # ascending (sign 1) or counted from the top (sign -1)
    sign: int
    t: float  # interpolation weight between the two ranks


@functools.lru_cache(maxsize=256)
def _plan(n_b: int, n_c: int, resamples: int, seed: int) -> tuple[Ints, Ints, list[_Tail]]:
    """`_resample_plan` reduced to what the data needs. A resampled median is the mean of two
    positions (lo, hi) of a sorted sample; `combos` are the distinct ones per side, a resample
    is a cell (baseline combo, candidate combo). A bound's tail drops the cells that cannot
    reach its ranks for any data: more resamples than the rank have a ratio certainly nearer
    that end (candidate positions all <=, baseline positions all >=)."""
    combos, inverse = [], []
    for idx in _resample_plan(n_b, n_c, resamples, seed):
        idx.sort(axis=1)
        middle = np.stack((idx[:, (idx.shape[1] - 1) // 2], idx[:, idx.shape[1] // 2]), axis=1)
        unique, inv = np.unique(middle, axis=0, return_inverse=True)
        combos.append(unique)
        inverse.append(inv.ravel())
    cells, weights = np.unique(np.stack(inverse, axis=1), axis=0, return_counts=True)
    pos_b, pos_c = combos[0][cells[:, 0]], combos[1][cells[:, 1]]
    prune = len(cells) <= 4000  # below[i, j]: ratio of cell j <= ratio of cell i, always
    below = np.ones((len(cells),) * 2 if prune else (0, 0), np.bool_)
    for k in range(2 if prune else 0):
        below &= (pos_c[None, :, k] <= pos_c[:, None, k]) & (pos_b[None, :, k] >= pos_b[:, None, k])
    tails = []
    for q, sign in ((_TAIL, 1), (1 - _TAIL, -1)):
        lo = math.floor(q * (resamples - 1))
        r0, r1 = lo, min(lo + 1, resamples - 1)
        ranks = (r0, r1) if sign == 1 else (resamples - 1 - r0, resamples - 1 - r1)
        nearer = (below if sign == 1 else below.T) @ weights - weights if prune else 0 * weights
        keep = nearer < max(ranks) + 1
        tails.append(
            _Tail(
                cells[keep, 0], cells[keep, 1], weights[keep], ranks, sign, q * (resamples - 1) - lo
            )
        )
    return combos[0], combos[1], tails


def _bootstrap_rows(b_sorted: Floats, c_sorted: Floats, opts: Options) -> tuple[Floats, Floats]:
    """Per-row percentile bootstrap CI of the median ratio, from row-sorted samples: the
    weighted order statistics of each tail's cells, as np.quantile over all resamples."""
    combos_b, combos_c, tails = _plan(
        b_sorted.shape[1], c_sorted.shape[1], opts.resamples, opts.seed
    )
    b, c, rows = b_sorted, c_sorted, np.arange(len(b_sorted))
    med_b = np.maximum((b[:, combos_b[:, 0]] + b[:, combos_b[:, 1]]) / 2, FLOOR_MS)
    med_c = np.maximum((c[:, combos_c[:, 0]] + c[:, combos_c[:, 1]]) / 2, FLOOR_MS)
    bounds = []
    for tail in tails:
        ratios = tail.sign * (med_c[:, tail.cell_c] / med_b[:, tail.cell_b])
        order = np.argsort(ratios, axis=1)
        ranked = np.take_along_axis(ratios, order, axis=1)
        covered = np.cumsum(tail.weights[order], axis=1)
        a, z = (tail.sign * ranked[rows, (covered > r).argmax(axis=1)] for r in tail.ranks)
        bounds.append(lerp(a, z, tail.t))
    return bounds[0], bounds[1]


def _mann_whitney_rows(b: Floats, c: Floats) -> Floats:
    """Row-wise `mann_whitney_p`. scipy's 'auto' (exact if a side has <= 8 values and there
    are no ties) looks for ties in the whole batch: the choice is made per row here."""
    joint = np.sort(np.concatenate((b, c), axis=1), axis=1)
    exact = ~(joint[:, 1:] == joint[:, :-1]).any(axis=1) & (min(b.shape[1], c.shape[1]) <= 8)
    p = np.empty(len(b))
    methods: tuple[tuple[Bools, Literal["asymptotic", "exact"]], ...] = (
        (~exact, "asymptotic"),
        (exact, "exact"),
    )
    for rows, method in methods:
        if rows.any():
            result = sps.mannwhitneyu(b[rows], c[rows], axis=1, method=method)
            p[rows] = np.asarray(result.pvalue, np.float64)
    return p


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.3g}%"


def unchanged_reason(margin: float) -> str:
    return f"CI within the ±{_pct(margin)} equivalence margin"


def decide(
    ratio: float,
    low: float,
    high: float,
    p: float,
    opts: Options,
    floor: float | None,
) -> tuple[Verdict, str]:
    """The verdict from an effect, its CI and a p-value. A regression or improvement needs
    significance, the minimum effect and the A/A noise floor; `unchanged` needs the whole CI
    inside the minimum-effect margin, which a noise floor never widens: a floor can only turn
    a verdict into `inconclusive`."""
    threshold, effect = max(opts.min_effect, floor or 0.0), max(ratio, 1 / ratio) - 1
    slower = low > 1
    significant = (slower or high < 1) and p < opts.alpha and (ratio > 1) == slower
    if significant and effect >= threshold:
        verdict = Verdict.REGRESSED if slower else Verdict.IMPROVED
        return verdict, f"significant (p={p:.2g}) and {_pct(effect)} >= {_pct(threshold)}"
    if significant and effect >= opts.min_effect:  # a real move the A/A noise could also make
        return Verdict.INCONCLUSIVE, (
            f"a change of {_pct(effect)} is inside the A/A noise floor of {_pct(threshold)}"
        )
    margin = opts.min_effect
    if low >= 1 / (1 + margin) and high <= 1 + margin:
        return Verdict.UNCHANGED, unchanged_reason(margin)
    if significant:
        return (
            Verdict.INCONCLUSIVE,
            f"a change of {_pct(effect)} is below the {_pct(opts.min_effect)} minimum effect",
        )
    if low < 1 / (1 + margin) and high > 1 + margin:
        return Verdict.INCONCLUSIVE, "the CI is too wide to decide"
    if p >= opts.alpha:
        return Verdict.INCONCLUSIVE, f"not significant (p={p:.2g})"
    return Verdict.INCONCLUSIVE, f"not significant: the CI and the rank test (p={p:.2g}) disagree"
