"""A/A calibration: the same target measured twice, interleaved, gives a noise floor per query.

`planshift noise WORKLOAD` runs the workload with one variant duplicated (`aa1`, `aa2`: the
same settings) and stores it as a run labelled `noise:<server>`. `compare` then uses the
latest such run of the baseline's server: an effect inside a query's noise floor is
`inconclusive`, never a regression.

The floor of a query is how far from 1.0 the 95% CI of its A/A effect reaches. The two sides of
an A/A run are interleaved, so the CI is the paired one (`stats_paired`), the one a verdict on
an interleaved comparison uses; two independent samples would give a floor as wide as the
parameters' and the machine's spread, which no paired verdict could ever clear. A query whose
A/A samples are not matched by sample index (or too few) gets the two-sample floor.
"""

from __future__ import annotations

from dataclasses import replace

from detector.engine import stats
from detector.engine.comparison.alignment import aligned
from detector.engine.comparison.options import CompareOptions
from detector.engine.comparison.query_pairs import SidePair, pair_sides
from detector.engine.stats_paired import compare_paired
from detector.errors import PlanshiftError
from detector.store import Store, TargetRecord

NOISE_LABEL = "noise"
AA_VARIANTS = ("aa1", "aa2")


def noise_label(server: str) -> str:
    return f"{NOISE_LABEL}:{server}"


def latest_noise_run(store: Store, target: TargetRecord) -> int | None:
    """The latest complete A/A run of the target's server (None when never calibrated)."""
    server = str(target.info.get("server") or target.name)
    runs = [
        r
        for r in store.runs()
        if r.kind == "noise" and r.label == noise_label(server) and r.status == "complete"
    ]
    return max((r.run_id for r in runs), default=None)


def noise_floors(store: Store, run_id: int) -> dict[str, float]:
    """Noise floor per query label (`name` or `name [point]`) from an A/A run's two sides."""
    targets = store.targets([run_id])
    if len(targets) != 2:
        raise PlanshiftError(
            f"run {run_id} is not an A/A run (it has {len(targets)} targets, expected 2)",
            "create one with `planshift noise WORKLOAD.toml`",
        )
    return {
        pair.label: pair_floor(pair)
        for pair in pair_sides(store, targets[0], targets[1])
        if len(pair.baseline.durations_ms) >= 2 and len(pair.candidate.durations_ms) >= 2
    }


def pair_floor(pair: SidePair) -> float:
    """The noise floor of one A/A query: paired when its samples are matched by index."""
    baseline, candidate = aligned(pair) if pair.baseline.sample_indices else ([], [])
    if baseline:
        effect = compare_paired(baseline, candidate, min_effect=0.0)
        if effect.ci_low is not None and effect.ci_high is not None:
            return max(effect.ci_high, 1 / effect.ci_low) - 1
    return stats.noise_floor(pair.baseline.durations_ms, pair.candidate.durations_ms)


def with_noise_floors(store: Store, options: CompareOptions, run_id: int | None) -> CompareOptions:
    if run_id is None:
        return replace(options, noise_run=None)
    return replace(options, noise_floors=noise_floors(store, run_id), noise_run=run_id)
