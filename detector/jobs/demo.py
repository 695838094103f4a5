"""The demo job: the demo workload run on an embedded server and compared."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from detector.engine.comparison.options import CompareOptions
from detector.errors import PlanshiftError
from detector.jobs.compare import compare_from_store
from detector.jobs.run import execute_run
from detector.jobs.workload import load_workload
from detector.reports.comparison.terminal import render_terminal
from detector.reports.escape import single_line

# a symlink to examples/demo/workload.toml in a checkout, the file itself in a wheel
DEMO_WORKLOAD = Path(__file__).resolve().parent / "demo_workload.toml"


def run_demo(
    *,
    store_path: Path,
    workload: Path | None,
    repetitions: int | None,
    console: Console,
    progress_console: Console,
) -> None:
    path = workload or DEMO_WORKLOAD
    if not path.exists():
        raise PlanshiftError(
            f"demo workload {path} not found", "run from a checkout, or pass --workload"
        )
    loaded = load_workload(path)
    variants = list(loaded.variants)
    if len(variants) != 2:
        raise PlanshiftError(
            f"{path.name}: the demo needs exactly two [variants], found {len(variants)}"
        )
    run_id = execute_run(
        workload_path=path,
        store_path=store_path,
        targets=[],
        dsns=[],
        repetitions=repetitions,
        warmup=None,
        label="demo",
        queries=[],
        keep=False,
        pg_bins=[],
        console=progress_console,
    )
    text = f"run {run_id} stored in {store_path}; comparing {variants[0]} -> {variants[1]}"
    console.print(single_line(text) + "\n", markup=False)
    options = CompareOptions()
    result = compare_from_store(store_path, variants[0], variants[1], run_id, options)
    render_terminal(result, console, verbose=True)
    text = (
        f"same comparison as: planshift compare --store {store_path} "
        f"--baseline {variants[0]} --candidate {variants[1]}"
    )
    console.print("\n" + single_line(text), markup=False)
