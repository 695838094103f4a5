"""Paired timing statistics: the verdict for sides measured in one interleaved run.

The runner executes sample i of a query on every side back to back, with the same parameter
values. Two executions of the same sample share what the parameters decide (how many rows a
range covers) and what the machine was doing at that moment (load, cache, a checkpoint), so
the per-sample ratio candidate_i / baseline_i cancels both; comparing the two sides as
independent samples would leave both in the noise. Per query:

* the effect is the median of the per-sample ratios, taken on the log scale (so 2x slower and
  2x faster weigh alike; with an even count it is the geometric mean of the middle two);
* its uncertainty is a percentile bootstrap CI that resamples pairs, never splitting one;
* a test of the 20%-trimmed mean of the log ratios (Yuen's paired t-test) must agree with the
  CI. Why not the Wilcoxon signed-rank test: on a loaded machine one execution in ten is
  descheduled and takes 2-5x longer, and that one pair gets the largest rank of all and vetoes
  a clear effect (ratios 1.34 1.39 1.29 1.24 1.26 1.16 0.51 1.36 1.35 1.29: p = 0.08); and its
  smallest possible p-value at 10 pairs, 0.002, cannot pass false discovery control across
  more than 25 queries. Trimming the two most extreme pairs at each end keeps the test to the
  bulk of the pairs; under A/A the two sides are exchangeable, so the log ratios are symmetric
  about zero and the t approximation holds (bench/bench_detection.py measures both);
* the minimum effect, the A/A noise floor and the equivalence margin apply as to unpaired
  samples (`detector.engine.stats.decide`).

The bootstrap needs no per-resample sorting: a resample's median is the mean of two order
statistics of the sorted log ratios, at positions that depend only on the resample plan
(`_plan`), so each query reads its CI bounds off a few dozen weighted candidates.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

from detector.engine.stats import (
    CONFIDENCE,
    FLOOR_MS,
    Bools,
    Floats,
    Ints,
    Options,
    decide,
    lerp,
    unchanged_reason,
)
from detector.model.bulk import builder
from detector.model.comparison import TimingComparison, Verdict

_CHUNK_VALUES = 200_000  # log ratios per batch chunk
_new = builder(TimingComparison)


def paired_log_ratios(baseline: Sequence[float], candidate: Sequence[float]) -> Floats:
    """log(candidate_i / baseline_i) per sample; the two sequences are aligned by sample."""
    b, c = np.asarray(baseline, np.float64), np.asarray(candidate, np.float64)
    if b.shape != c.shape or b.ndim != 1 or b.size == 0:
        raise ValueError("paired samples: two non-empty sequences of the same length")
    return np.asarray(np.log(np.maximum(c, FLOOR_MS) / np.maximum(b, FLOOR_MS)), np.float64)


def compare_paired(
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
    """Verdict for one query from samples aligned by sample index (baseline[i] ~ candidate[i])."""
    return compare_paired_batch(
        [(baseline, candidate)],
        min_effect=min_effect,
        alpha=alpha,
        min_samples=min_samples,
        noise_floor=[noise_floor],
        resamples=resamples,
        seed=seed,
    )[0]


def compare_paired_batch(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    *,
    min_effect: float = 0.10,
    alpha: float = 0.05,
    min_samples: int = 5,
    noise_floor: Sequence[float | None] | None = None,
    resamples: int = 2000,
    seed: int = 0,
) -> list[TimingComparison]:
    """`compare_paired` for many queries at once, in input order."""
    opts = Options(min_effect, alpha, min_samples, resamples, seed)
    floors = _floors(noise_floor, len(pairs))
    by_size: defaultdict[int, list[int]] = defaultdict(list)
    logs: list[Floats] = []
    for i, (b, c) in enumerate(pairs):
        logs.append(paired_log_ratios(b, c))
        by_size[logs[-1].size].append(i)
    results: dict[int, TimingComparison] = {}
    for n, group in by_size.items():
        step = max(1, _CHUNK_VALUES // n)
        for members in (group[s : s + step] for s in range(0, len(group), step)):
            rows = np.stack([logs[i] for i in members])
            verdicts = _decide_rows(rows, [floors[i] for i in members], opts)
            results.update(zip(members, verdicts, strict=True))
    return [results[i] for i in range(len(pairs))]


def compare_paired_rows(
    baseline: Floats,
    candidate: Floats,
    *,
    min_effect: float = 0.10,
    alpha: float = 0.05,
    min_samples: int = 5,
    noise_floor: Sequence[float | None] | None = None,
    resamples: int = 2000,
    seed: int = 0,
) -> list[TimingComparison]:
    """`compare_paired_batch` for queries with the same number of pairs, as two
    (queries, pairs) arrays aligned by sample: row i is query i."""
    opts = Options(min_effect, alpha, min_samples, resamples, seed)
    if baseline.shape != candidate.shape or baseline.ndim != 2 or baseline.shape[1] == 0:
        raise ValueError("paired rows: two (queries, pairs) arrays of one shape, pairs > 0")
    floors = _floors(noise_floor, len(baseline))
    logs = np.log(np.maximum(candidate, FLOOR_MS) / np.maximum(baseline, FLOOR_MS))
    step = max(1, _CHUNK_VALUES // baseline.shape[1])
    out: list[TimingComparison] = []
    for start in range(0, len(logs), step):
        out += _decide_rows(logs[start : start + step], floors[start : start + step], opts)
    return out


def _floors(noise_floor: Sequence[float | None] | None, count: int) -> list[float | None]:
    floors: list[float | None] = [None] * count if noise_floor is None else list(noise_floor)
    if len(floors) != count or not all(f is None or f >= 0 for f in floors):
        raise ValueError("noise_floor: None or >= 0, one per pair")
    return floors


def _decide_rows(rows: Floats, floors: list[float | None], opts: Options) -> list[TimingComparison]:
    count, n = rows.shape
    finite: list[bool] = np.asarray(np.isfinite(rows).all(axis=1), np.bool_).tolist()
    ordered = np.sort(np.where(np.isfinite(rows), rows, 0.0), axis=1)
    effects = np.exp((ordered[:, (n - 1) // 2] + ordered[:, n // 2]) / 2)
    effect: list[float] = effects.tolist()
    if n >= opts.min_samples:
        lows, highs = _bootstrap(ordered, opts)
        ps = trimmed_t_p(ordered)
        low, high, p = lows.tolist(), highs.tolist(), ps.tolist()
        unchanged = unchanged_reason(opts.min_effect)
        plain = _plainly_unchanged(effects, lows, highs, ps, floors, opts).tolist()
    out = []
    for i in range(count):
        if not finite[i] or n < opts.min_samples:
            reason = (
                "non-finite timing values"
                if not finite[i]
                else (f"too few pairs: {n} < {opts.min_samples}")
            )
            ratio = effect[i] if finite[i] else None
            out.append(
                _new(
                    Verdict.INCONCLUSIVE,
                    ratio,
                    None,
                    None,
                    None,
                    opts.min_effect,
                    floors[i],
                    reason,
                    True,
                    None,
                    None,
                )
            )
            continue
        if plain[i]:
            verdict, reason, decide_at = Verdict.UNCHANGED, unchanged, None
        else:
            verdict, reason = decide(effect[i], low[i], high[i], p[i], opts, floors[i])
            decide_at = samples_to_decide(verdict, effect[i], low[i], high[i], n, opts, floors[i])
        out.append(
            _new(
                verdict,
                effect[i],
                low[i],
                high[i],
                p[i],
                opts.min_effect,
                floors[i],
                reason,
                True,
                None,
                decide_at,
            )
        )
    return out


def _plainly_unchanged(
    effect: Floats,
    low: Floats,
    high: Floats,
    p: Floats,
    floors: list[float | None],
    opts: Options,
) -> Bools:
    """Rows `decide` calls unchanged without a floor: the CI inside the margin and not
    significant at the minimum effect. Rows with a noise floor go through `decide`."""
    margin = opts.min_effect
    magnitude = np.maximum(effect, 1 / effect) - 1
    slower = low > 1
    significant = (slower | (high < 1)) & (p < opts.alpha) & ((effect > 1) == slower)
    inside = (low >= 1 / (1 + margin)) & (high <= 1 + margin)
    no_floor = np.fromiter((f is None for f in floors), np.bool_, len(floors))
    return np.asarray(inside & ~(significant & (magnitude >= margin)) & no_floor, np.bool_)


@functools.lru_cache(maxsize=64)
def _plan(n: int, resamples: int, seed: int) -> tuple[Ints, Ints]:
    """The distinct (lower, upper) middle positions of the sorted resamples, and how many
    resamples have each: a resample's median is the mean of the values at those positions."""
    idx = np.random.default_rng(seed).integers(0, n, (resamples, n))
    idx.sort(axis=1)
    middle = np.stack((idx[:, (n - 1) // 2], idx[:, n // 2]), axis=1)
    combos, weights = np.unique(middle, axis=0, return_counts=True)
    return combos.astype(np.int64), weights.astype(np.int64)


def _bootstrap(ordered: Floats, opts: Options) -> tuple[Floats, Floats]:
    """Percentile CI of the median log ratio per row (exp'd), as np.quantile over resamples."""
    combos, weights = _plan(ordered.shape[1], opts.resamples, opts.seed)
    medians = (ordered[:, combos[:, 0]] + ordered[:, combos[:, 1]]) / 2
    order = np.argsort(medians, axis=1, kind="stable")
    ranked = np.take_along_axis(medians, order, axis=1)
    covered = np.cumsum(weights[order], axis=1)
    rows = np.arange(len(ordered))
    bounds = []
    for q in ((1 - CONFIDENCE) / 2, 1 - (1 - CONFIDENCE) / 2):
        position = q * (opts.resamples - 1)
        k = math.floor(position)
        at, after = (
            ranked[rows, (covered > r).argmax(axis=1)] for r in (k, min(k + 1, opts.resamples - 1))
        )
        bounds.append(np.exp(lerp(at, after, position - k)))
    return bounds[0], bounds[1]


TRIM = 0.2  # share of pairs trimmed at each end by the paired test


def trimmed_t_p(ordered: Floats) -> Floats:
    """Two-sided p-value of Yuen's test that the 20%-trimmed mean of each row is zero, from
    row-sorted log ratios: trimmed mean / its winsorized standard error, t with h - 1 degrees
    of freedom (h: the pairs kept). Rows with no spread: 1 at zero, else 0."""
    n = ordered.shape[1]
    g = math.floor(TRIM * n)
    kept = n - 2 * g
    mean = ordered[:, g : n - g].mean(axis=1)
    winsorized = np.clip(ordered, ordered[:, [g]], ordered[:, [n - g - 1]])
    spread = winsorized.var(axis=1, ddof=1) * (n - 1) / (kept * (kept - 1))
    p = np.where(mean == 0, 1.0, 0.0)
    some = spread > 0
    t = np.abs(mean[some]) / np.sqrt(spread[some])
    p[some] = 2 * sps.t.sf(t, kept - 1)
    return np.asarray(p, np.float64)


def samples_to_decide(
    verdict: Verdict,
    effect: float,
    low: float,
    high: float,
    n: int,
    opts: Options,
    floor: float | None,
) -> int | None:
    """For an inconclusive verdict: about how many pairs would settle it, from the CI's width
    shrinking as 1/sqrt(n); None when the effect sits on a decision boundary."""
    if verdict is not Verdict.INCONCLUSIVE or not (low > 0 and high > 0 and effect > 0):
        return None
    half = (math.log(high) - math.log(low)) / 2
    centre = abs(math.log(effect))
    threshold = math.log1p(max(opts.min_effect, floor or 0.0))
    room = centre if centre >= threshold else math.log1p(opts.min_effect) - centre
    if room <= half * 0.05 or room <= 0:
        return None
    needed = math.ceil(n * (half / room) ** 2 * 1.2)
    return max(needed, n + 1)
