"""Timing verdicts of the queries of a comparison: paired statistics for interleaved sides,
two-sample statistics otherwise, the minimum change in milliseconds, and false discovery
control across the queries (see `detector.engine.comparison.compare.HOW_IT_DECIDES`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from detector.engine import false_discoveries, stats, stats_paired
from detector.engine.comparison.alignment import aligned_rows
from detector.engine.comparison.options import CompareOptions
from detector.engine.comparison.query_pairs import SidePair
from detector.model import TimingComparison, Verdict


def query_verdicts(
    pairs: Sequence[SidePair], interleaved: bool, options: CompareOptions
) -> list[TimingComparison | None]:
    """Each pair's timing verdict after false discovery control; None without timings."""
    timed = [i for i, p in enumerate(pairs) if p.baseline.durations_ms or p.candidate.durations_ms]
    timed_pairs = pairs if len(timed) == len(pairs) else [pairs[i] for i in timed]
    moved = (Verdict.REGRESSED, Verdict.IMPROVED)  # what below_min_delta may change
    verdicts = false_discoveries.control_own_false_discoveries(  # made here: q-values filled in
        [
            below_min_delta(pairs[i], verdict, options.min_delta_ms)
            if verdict.verdict in moved
            else verdict
            for i, verdict in zip(
                timed, timing_verdicts(timed_pairs, interleaved, options), strict=True
            )
        ],
        options.alpha,
    )
    if len(timed) == len(pairs):
        return list(verdicts)
    out: list[TimingComparison | None] = [None] * len(pairs)
    for i, verdict in zip(timed, verdicts, strict=True):
        out[i] = verdict
    return out


def timing_verdicts(
    timed: Sequence[SidePair], interleaved: bool, options: CompareOptions
) -> list[TimingComparison]:
    """Paired statistics for the samples both interleaved sides have, two-sample statistics
    otherwise (other runs, time windows, a side without timings)."""
    floors = (
        [options.noise_floors.get(p.label) for p in timed]
        if options.noise_floors
        else [None] * len(timed)
    )
    results: dict[int, TimingComparison] = {}
    for members, base, cand in (aligned_rows(timed) if interleaved else {}).values():
        positions = members.tolist()
        paired = stats_paired.compare_paired_rows(
            base,
            cand,
            min_effect=options.min_effect,
            alpha=options.alpha,
            min_samples=options.min_samples,
            noise_floor=[floors[i] for i in positions],
        )
        if len(positions) == len(timed):  # every pair, in order: members ascend
            return paired
        results.update(zip(positions, paired, strict=True))
    unpaired = [i for i in range(len(timed)) if i not in results]
    results.update(
        zip(
            unpaired,
            stats.compare_timings_batch(
                [
                    (timed[i].baseline.durations_ms, timed[i].candidate.durations_ms)
                    for i in unpaired
                ],
                min_effect=options.min_effect,
                alpha=options.alpha,
                min_samples=options.min_samples,
                noise_floor=[floors[i] for i in unpaired],
            ),
            strict=True,
        )
    )
    return [results[i] for i in range(len(timed))]


def below_min_delta(
    pair: SidePair, timing: TimingComparison, min_delta_ms: float
) -> TimingComparison:
    """A significant change of a few microseconds is real but immaterial: inconclusive."""
    base, cand = pair.baseline.timing, pair.candidate.timing
    if timing.verdict not in (Verdict.REGRESSED, Verdict.IMPROVED) or base is None or cand is None:
        return timing
    delta = cand.median_ms - base.median_ms
    if abs(delta) >= min_delta_ms:
        return timing
    reason = (
        f"the median moved {abs(delta) * 1000:.1f} µs, below the {min_delta_ms * 1000:g} µs minimum"
    )
    return replace(timing, verdict=Verdict.INCONCLUSIVE, reason=reason)


def plan_only_timing(
    min_effect: float, reason: str = "plan-only: no timings (generic plan or plain EXPLAIN)"
) -> TimingComparison:
    """Plans captured without execution (EXPLAIN (GENERIC_PLAN), logs without timings)."""
    return TimingComparison(
        verdict=Verdict.INCONCLUSIVE,
        ratio=None,
        ci_low=None,
        ci_high=None,
        p_value=None,
        min_effect=min_effect,
        noise_floor=None,
        reason=reason,
    )
