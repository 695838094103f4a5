"""The counterfactual's verdict: the rejected plan against the chosen one, on the candidate.

The run times the plan the candidate rejected and the one it chose back to back, sample by
sample (collectors/counterfactual.py), and keeps every pair. Those pairs are an interleaved
comparison like any other, so the paired statistics of the run's own verdicts decide them
(stats_paired: biweight location of the log ratios, its t interval, the minimum effect): the
planner chose the faster plan only when the rejected one is significantly and meaningfully
slower; a ratio whose interval holds 1 or stays within the minimum effect is
"indistinguishable". Counterfactuals stored before the pairs were kept have no verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from detector.engine.stats_paired import compare_paired


def judged(
    attribution: Mapping[str, Any], *, min_effect: float, alpha: float, min_samples: int
) -> Mapping[str, Any]:
    """The attribution with its counterfactual's verdict added (`verdict`, `ci_low`, `ci_high`,
    `p_value`, `min_effect`; ratio = rejected / chosen), when its pairs were kept."""
    timed = attribution.get("counterfactual")
    if not isinstance(timed, Mapping):
        return attribution
    forced, chosen = timed.get("forced_ms"), timed.get("chosen_ms")
    if not forced or not chosen or len(forced) != len(chosen):
        return attribution
    verdict = compare_paired(
        [float(ms) for ms in chosen],
        [float(ms) for ms in forced],
        min_effect=min_effect,
        alpha=alpha,
        min_samples=min_samples,
    )
    interval = {
        "verdict": verdict.verdict.value,
        "ratio": verdict.ratio,
        "ci_low": verdict.ci_low,
        "ci_high": verdict.ci_high,
        "p_value": verdict.p_value,
        "min_effect": min_effect,
        "reason": verdict.reason,
    }
    return {**attribution, "counterfactual": {**timed, "interval": interval}}
