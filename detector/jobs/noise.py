"""The noise job: an A/A run of a workload on one server, for noise floors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from collectors.servers.targets import resolve_target_specs
from detector.engine.comparison.noise import AA_VARIANTS, noise_floors, noise_label
from detector.errors import PlanshiftError
from detector.jobs.workload import load_workload
from detector.store import Store


def run_noise(
    *,
    workload_path: Path,
    store_path: Path,
    target: str | None,
    variant: str | None,
    repetitions: int | None,
    pg_bins: Sequence[Path],
    console: Console,
) -> tuple[int, dict[str, float]]:
    """Run one variant twice, interleaved (A/A), store it as `noise:<server>`, return the floors."""
    from detector.jobs.run import execute_run

    workload = load_workload(workload_path)
    chosen = variant or next(iter(workload.variants))
    if chosen not in workload.variants:
        raise PlanshiftError(
            f"{workload_path.name}: no variant {chosen!r}",
            f"variants: {', '.join(workload.variants)}",
        )
    gucs = workload.variants[chosen]
    specs = resolve_target_specs(workload.targets, [target] if target else [], {})
    if len(specs) != 1:
        raise PlanshiftError(
            f"{workload_path.name} has {len(specs)} targets; noise calibrates one server at a time",
            "--target NAME",
        )
    server = specs[0].name
    run_id = execute_run(
        workload_path=workload_path,
        store_path=store_path,
        targets=[server] if target else [],
        dsns=[],
        repetitions=repetitions,
        warmup=None,
        label=noise_label(server),
        kind="noise",
        queries=[],
        keep=False,
        pg_bins=pg_bins,
        console=console,
        variants={name: dict(gucs) for name in AA_VARIANTS},
    )
    with Store(store_path, read_only=True) as store:
        return run_id, noise_floors(store, run_id)
