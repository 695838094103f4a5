"""A/A calibration: the same target measured twice, interleaved, gives a noise floor per query.

`planshift noise WORKLOAD` runs the workload with one variant duplicated (`aa1`, `aa2`: the
same settings) and stores it as a run labelled `noise:<server>`. `compare` then uses the
latest such run of the baseline's server: an effect inside a query's noise floor is
`inconclusive`, never a regression.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from detector.engine import stats
from detector.engine.pairing import pair_sides
from detector.errors import PlanshiftError
from detector.store import Store, TargetRecord

if TYPE_CHECKING:
    from detector.engine.compare import CompareOptions

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
        pair.label: stats.noise_floor(pair.baseline.durations_ms, pair.candidate.durations_ms)
        for pair in pair_sides(store, targets[0], targets[1])
        if len(pair.baseline.durations_ms) >= 2 and len(pair.candidate.durations_ms) >= 2
    }


def with_noise_floors(store: Store, options: CompareOptions, run_id: int | None) -> CompareOptions:
    if run_id is None:
        return replace(options, noise_run=None)
    return replace(options, noise_floors=noise_floors(store, run_id), noise_run=run_id)
