"""`planshift demo`: the embedded demo, a run and its comparison in one command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from detector.cli.common import (
    StoreOption,
    out,
    progress,
    user_errors,
)


def demo(
    store: StoreOption = Path("planshift-demo.duckdb"),
    workload: Annotated[
        Path | None, typer.Option(help="Workload (default: examples/demo/workload.toml).")
    ] = None,
    repetitions: Annotated[
        int | None, typer.Option(help="Measured executions per query and side.")
    ] = None,
) -> None:
    """Start an embedded PostgreSQL, run the demo workload under two GUC variants, compare them."""
    from detector.jobs.demo import run_demo

    with user_errors():
        run_demo(
            store_path=store,
            workload=workload,
            repetitions=repetitions,
            console=out,
            progress_console=progress,
        )
