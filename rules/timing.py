"""PS2xx timing: the measured verdict itself (bootstrap CI of the median ratio, minimum effect)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, Severity, Verdict
from rules.base import rule
from rules.common import emit, percentiles_text, timing_evidence


def _timing_message(comparison: QueryComparison) -> str:
    parts = [comparison.timing.describe()]
    spread = percentiles_text(comparison.baseline.timing, comparison.candidate.timing)
    if spread:
        parts.append(spread)
    plan = "plan changed (see PS100)" if comparison.plan_changed else "same plan"
    return ", ".join(parts) + f"; {plan}"


def _median_delta_ms(comparison: QueryComparison) -> float | None:
    base, cand = comparison.baseline.timing, comparison.candidate.timing
    if base is None or cand is None:
        return None
    return cand.median_ms - base.median_ms


def _evidence(comparison: QueryComparison) -> dict[str, Any]:
    return {
        **timing_evidence(comparison),
        "median_delta_ms": _median_delta_ms(comparison),
        "plan_changed": comparison.plan_changed,
    }


@rule("PS200", "timing-regression", "timing", Severity.ERROR, min_delta_ms=0.0)
def timing_regression(comparison: QueryComparison, options: Mapping[str, Any]) -> Iterator[Finding]:
    """The candidate is measured slower: the timing verdict is `regressed`.

    ## What it flags
    A query whose timing comparison says `regressed`: the bootstrap confidence
    interval of the median ratio lies above 1, the effect exceeds the minimum
    (default 10%) and the A/A noise floor. Always an error. Too few samples or an
    overlapping interval is `inconclusive` and never fires. With `min_delta_ms`
    (default 0.0) a regression whose median grows by less than that many
    milliseconds is skipped (sub-millisecond queries in a CI gate).

    ## Why it matters
    This is the number the users feel. It is reported from the distributions
    (median, p90, CI), never from a lone mean: seed 002 shows how averages hide
    variability. The message says whether the plan changed too: a slowdown with
    the same plan points at settings, I/O or the executor (seed 001:
    effective_io_concurrency changes the duration 4x while the cost stays the
    same), not the planner.

    ## Example
    Seed 003, simple_range, PG 10 -> PG 17:

        1.23x slower (95% CI 1.15-1.31), median 2.10 ms -> 2.60 ms,
        p90 2.40 ms -> 3.10 ms; plan changed (see PS100)

    ## What to do
    If the plan changed, start from the plan-flip findings. If not, compare the
    settings and the buffers (shared read versus hit) of both sides, and rerun
    with more samples if the interval is wide.
    """
    if comparison.timing.verdict is not Verdict.REGRESSED:
        return
    delta = _median_delta_ms(comparison)
    if delta is not None and delta < float(options["min_delta_ms"]):
        return
    yield emit("PS200", comparison, _timing_message(comparison), _evidence(comparison))


@rule("PS201", "timing-improvement", "timing", Severity.INFO)
def timing_improvement(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """The candidate is measured faster: the timing verdict is `improved`.

    ## What it flags
    A query whose timing comparison says `improved`: the confidence interval of
    the median ratio lies below 1 and the effect exceeds the minimum and the noise
    floor. Always info; it never fails a CI gate.

    ## Why it matters
    An upgrade or a settings change is judged by its wins as well as its losses,
    and an improvement that comes with a plan flip shows which plan the candidate
    should keep.

    ## Example
    `effective_io_concurrency` 1 -> 100, a Bitmap Heap Scan over uncached pages:

        3.68x faster (95% CI 0.26-0.29), median 65604 ms -> 17807 ms,
        p90 66010 ms -> 18120 ms; same plan

    ## What to do
    Nothing is required. Keep the change; if it came with a plan flip, note the
    plan so a later flip back is recognised as a regression.
    """
    if comparison.timing.verdict is not Verdict.IMPROVED:
        return
    yield emit("PS201", comparison, _timing_message(comparison), _evidence(comparison))
