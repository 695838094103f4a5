"""`planshift run`: measure a workload's queries on every target and variant."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from detector.cli.common import (
    DEFAULT_STORE,
    StoreOption,
    out,
    progress,
    user_errors,
)


def run(
    workload: Annotated[Path, typer.Argument(help="Workload file (TOML).")],
    target: Annotated[
        list[str] | None,
        typer.Option(
            "--target",
            "-t",
            help="Target: a workload target name, a version (pg15, pg17, pg18) or a --dsn name. Repeatable.",
        ),
    ] = None,
    dsn: Annotated[
        list[str] | None, typer.Option("--dsn", help="NAME=DSN of an existing server. Repeatable.")
    ] = None,
    store: StoreOption = DEFAULT_STORE,
    repetitions: Annotated[
        int | None, typer.Option(help="Measured executions per query and side.")
    ] = None,
    warmup: Annotated[int | None, typer.Option(help="Unmeasured executions first.")] = None,
    label: Annotated[str, typer.Option(help="Label stored with the run.")] = "",
    query: Annotated[
        list[str] | None, typer.Option("--query", "-q", help="Only this query. Repeatable.")
    ] = None,
    variant: Annotated[
        list[str] | None, typer.Option("--variant", help="Only this variant. Repeatable.")
    ] = None,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep embedded clusters' directories after the run.")
    ] = False,
    pg_bin: Annotated[
        list[Path] | None, typer.Option("--pg-bin", help="PostgreSQL bin directory to use.")
    ] = None,
    setup: Annotated[
        bool,
        typer.Option(
            "--setup",
            help="Also run the workload's \\[setup] SQL on --dsn servers: your consent, which "
            "the workload file cannot give (in CI: PLANSHIFT_ALLOW_SETUP=1). Default: only check "
            "that the tables it creates exist.",
        ),
    ] = False,
    cache: Annotated[
        str | None,
        typer.Option(
            "--cache",
            help="warm or cold for every query (default: the workload's, warm). Cold evicts "
            "what each measured execution reads from shared buffers (17+) and the OS page cache.",
        ),
    ] = None,
    plan_only: Annotated[
        bool,
        typer.Option(
            "--plan-only",
            help="Plain EXPLAIN, nothing executed: plans without timings, safe on any server "
            "(production included).",
        ),
    ] = False,
    counterfactual_budget: Annotated[
        str,
        typer.Option(
            "--counterfactual-budget",
            help="Time for timing the plan a flip's candidate rejected, per query point: a share "
            "of the point's measurement time (25%, the default), a duration (90s, 2min), off "
            "or unbounded.",
        ),
    ] = "25%",
    counterfactual_both: Annotated[
        bool,
        typer.Option(
            "--counterfactual-both",
            help="Time the rejected plan in both directions of each pair of sides (default: "
            "baseline -> candidate in the run's order of sides).",
        ),
    ] = False,
    max_load: Annotated[
        float | None,
        typer.Option(
            help="Pause measuring (between samples) while the 1-minute load average is above "
            "this; planshift's own client and server add about 1. Waits are recorded.",
        ),
    ] = None,
    max_wait: Annotated[
        float,
        typer.Option(help="With --max-load: seconds of pausing allowed in all, then measure on."),
    ] = 300.0,
) -> None:
    """Run a workload on every target x variant and store every execution."""
    from detector.jobs.run import execute_run

    with user_errors():
        run_id = execute_run(
            workload_path=workload,
            store_path=store,
            targets=target or [],
            dsns=dsn or [],
            repetitions=repetitions,
            warmup=warmup,
            label=label,
            queries=query or [],
            keep=keep,
            pg_bins=pg_bin or [],
            console=progress,
            only_variants=variant or [],
            setup_on_dsn=setup,
            cache=cache,
            plan_only=plan_only,
            counterfactual_budget=counterfactual_budget,
            counterfactual_both=counterfactual_both,
            max_load=max_load,
            max_wait=max_wait,
        )
    out.print(f"run {run_id} stored in {store}", markup=False)
