"""Paired timing statistics: the verdict for sides measured in one interleaved run.

The runner executes sample i of a query on every side back to back, with the same parameter
values. Two executions of the same sample share what the parameters decide (how many rows a
range covers) and what the machine was doing at that moment (load, cache, a checkpoint), so
the per-sample ratio candidate_i / baseline_i cancels both; comparing the two sides as
independent samples would leave both in the noise. Per query, on the log ratios:

* the effect is their biweight location (Tukey's biweight, reweighted from the median): a
  weighted mean in which a pair counts less the farther it lies from the bulk, and not at all
  beyond 6 MADs (median absolute deviations). Under two CPU burners about one pair in ten has
  an execution descheduled, 2-5x slower (bench/bench_detection.py), and now and then three of
  ten pairs do, on one side: the 20%-trimmed mean (two pairs cut at each end) still averages
  the third, and the percentile bootstrap of a median of 10 pairs spans whichever outliers its
  resamples draw twice: at 10 pairs they missed 9% and 19% of 1.3x slowdowns, this 3%;
* one t statistic gives both the test and the 95% CI: the location over its standard error
  (from the biweight midvariance, Mosteller and Tukey's robust variance, which gives no weight
  to pairs beyond 9 MADs), with (n - 1) / 2 degrees of freedom. With n - 1 of them, 8-15% of
  simulated A/A comparisons at 5-10 pairs fall below p = 0.05; with (n - 1) / 2, 5-8%, clean
  or with one execution in eight descheduled (tests/test_stats_paired.py checks it). So the
  interval and the test always agree: the CI excludes 1.0 exactly when p < 0.05;
* fewer than `min_samples` pairs (default 5) within 9 MADs is `inconclusive`, like fewer
  pairs in all: at 5 pairs, three that agree closely and two far away are no verdict (an A/A
  query under two CPU burners read 1.11x faster, p = 0.001, that way);
* the minimum effect, the A/A noise floor and the equivalence margin apply as to unpaired
  samples (`detector.engine.stats.decide`).

Under A/A the two executions of a pair are exchangeable, so the log ratios are symmetric
about zero and every step above is sign-symmetric: swapping the sides inverts the effect and
its CI and keeps the p-value; the order of the pairs never matters.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from itertools import repeat

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
    unchanged_reason,
)
from detector.model.bulk import builder
from detector.model.comparison import TimingComparison, Verdict
from detector.model.samples import row_medians

_CHUNK_VALUES = 200_000  # log ratios per batch chunk
LOCATION_C = 6.0  # a pair farther than this many MADs from the location gets no weight
SCALE_C = 9.0  # the same, for the standard error (biweight midvariance)
_STEPS = 10  # reweighting steps of the location, from the median
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
) -> TimingComparison:
    """Verdict for one query from samples aligned by sample index (baseline[i] ~ candidate[i])."""
    return compare_paired_batch(
        [(baseline, candidate)],
        min_effect=min_effect,
        alpha=alpha,
        min_samples=min_samples,
        noise_floor=[noise_floor],
    )[0]


def compare_paired_batch(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    *,
    min_effect: float = 0.10,
    alpha: float = 0.05,
    min_samples: int = 5,
    noise_floor: Sequence[float | None] | None = None,
) -> list[TimingComparison]:
    """`compare_paired` for many queries at once, in input order."""
    opts = Options(min_effect, alpha, min_samples, 1, 0)
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
) -> list[TimingComparison]:
    """`compare_paired_batch` for queries with the same number of pairs, as two
    (queries, pairs) arrays aligned by sample: row i is query i."""
    opts = Options(min_effect, alpha, min_samples, 1, 0)
    if baseline.shape != candidate.shape or baseline.ndim != 2 or baseline.shape[1] == 0:
        raise ValueError("paired rows: two (queries, pairs) arrays of one shape, pairs > 0")
    floors = _floors(noise_floor, len(baseline))
    step = max(1, _CHUNK_VALUES // baseline.shape[1])
    out: list[TimingComparison] = []
    for start in range(0, len(baseline), step):  # the logs of a chunk at a time
        chunk = slice(start, start + step)
        logs = np.log(
            np.maximum(candidate[chunk], FLOOR_MS) / np.maximum(baseline[chunk], FLOOR_MS)
        )
        out += _decide_rows(logs, floors[chunk], opts)
    return out


def _floors(noise_floor: Sequence[float | None] | None, count: int) -> list[float | None]:
    floors: list[float | None] = [None] * count if noise_floor is None else list(noise_floor)
    if len(floors) != count or not all(f is None or f >= 0 for f in floors):
        raise ValueError("noise_floor: None or >= 0, one per pair")
    return floors


def biweight_t(rows: Floats) -> tuple[Floats, Floats, float, Ints]:
    """Per row: (biweight location, its standard error, degrees of freedom of its t, how many
    pairs the standard error counts: those within `SCALE_C` MADs of the location)."""
    n = rows.shape[1]
    median = row_medians(rows)
    deviation = np.abs(rows - median[:, None])
    mad = row_medians(deviation)
    # more than half the ratios equal (timings at the clock's resolution): their mean
    # absolute deviation scales the rest; all equal: no spread at all
    scale = np.where(mad > 0, mad, deviation.mean(axis=1))
    scale = np.where(scale > 0, scale, 1.0)[:, None]
    location = median
    for _ in range(_STEPS):
        off = rows - location[:, None]
        u2 = np.minimum((off / (LOCATION_C * scale)) ** 2, 1.0)
        w = (1 - u2) ** 2
        location = location + (off * w).sum(axis=1) / w.sum(axis=1)
    off = rows - location[:, None]
    u2 = np.minimum((off / (SCALE_C * scale)) ** 2, 1.0)
    spread = (off**2 * (1 - u2) ** 4).sum(axis=1)
    weight = ((1 - u2) * (1 - 5 * u2)).sum(axis=1)
    se = np.sqrt(spread) / np.maximum(np.abs(weight), 1e-300)
    return location, se, (n - 1) / 2, np.asarray((u2 < 1).sum(axis=1), np.int64)


def _test(rows: Floats) -> tuple[Floats, Floats, Floats, Floats, Ints]:
    """(effect, CI low, CI high, two-sided p, pairs counted) per row, from the one biweight t."""
    location, se, df, counted = biweight_t(rows)
    spread = se > 0
    t = np.abs(location) / np.where(spread, se, 1.0)
    p = np.where(spread, 2 * sps.t.sf(t, df), np.where(location == 0, 1.0, 0.0))
    half = float(sps.t.ppf(1 - (1 - CONFIDENCE) / 2, df)) * se
    return np.exp(location), np.exp(location - half), np.exp(location + half), p, counted


def _decide_rows(rows: Floats, floors: list[float | None], opts: Options) -> list[TimingComparison]:
    count, n = rows.shape
    finite: list[bool] = np.asarray(np.isfinite(rows).all(axis=1), np.bool_).tolist()
    if n < opts.min_samples or not all(finite):
        return [
            _too_few(rows[i], floors[i], opts)
            if not finite[i] or n < opts.min_samples
            else _decide_rows(rows[i : i + 1], floors[i : i + 1], opts)[0]
            for i in range(count)
        ]
    effects, lows, highs, ps, counts = _test(rows)
    plain = _plainly_unchanged(effects, lows, highs, ps, floors, opts)
    effect, low, high, p = effects.tolist(), lows.tolist(), highs.tolist(), ps.tolist()
    # most rows are plainly unchanged: filled in as columns, the others decided one by one
    verdicts = [Verdict.UNCHANGED] * count
    reasons = [unchanged_reason(opts.min_effect)] * count
    decide_at: list[int | None] = [None] * count
    for i in np.flatnonzero((counts < opts.min_samples) | ~plain).tolist():
        counted = int(counts[i])
        if counted < opts.min_samples:  # a verdict would rest on a handful of pairs
            verdicts[i] = Verdict.INCONCLUSIVE
            reasons[i] = (
                f"only {counted} of {n} pairs agree (the others are over {SCALE_C:g} MADs "
                f"away: descheduled executions?); fewer than {opts.min_samples} decide nothing"
            )
            decide_at[i] = max(n + 1, math.ceil(n * opts.min_samples / max(counted, 1)))
        else:
            verdicts[i], reasons[i] = decide(effect[i], low[i], high[i], p[i], opts, floors[i])
            decide_at[i] = samples_to_decide(
                verdicts[i], effect[i], low[i], high[i], n, opts, floors[i]
            )
    return list(
        map(
            _new,
            verdicts,
            effect,
            low,
            high,
            p,
            repeat(opts.min_effect),
            floors,
            reasons,
            repeat(True),
            repeat(None),
            decide_at,
        )
    )


def _too_few(row: Floats, floor: float | None, opts: Options) -> TimingComparison:
    """Inconclusive without a test: fewer pairs than `min_samples`, or a non-finite timing."""
    n, finite = row.size, bool(np.isfinite(row).all())
    reason = f"too few pairs: {n} < {opts.min_samples}" if finite else "non-finite timing values"
    ratio = float(np.exp(np.median(row))) if finite else None
    return _new(
        Verdict.INCONCLUSIVE,
        ratio,
        None,
        None,
        None,
        opts.min_effect,
        floor,
        reason,
        True,
        None,
        None,
    )


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
