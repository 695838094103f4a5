"""Commands that measure and compare: run, compare, demo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from detector.cli.common import (
    DEFAULT_LOCK,
    DEFAULT_STORE,
    ConfigOption,
    LakeOption,
    StoreOption,
    out,
    progress,
    user_errors,
)
from detector.errors import PlanshiftError


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
        float, typer.Option(help="With --max-load: seconds of pausing allowed in all, then measure on.")
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


def compare(
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            "-b",
            help="Baseline side: NAME, SERVER/VARIANT, NAME@RUN or a time window SINCE..UNTIL "
            "(default: the first of a run with two sides).",
        ),
    ] = None,
    candidate: Annotated[
        str | None,
        typer.Option(
            "--candidate", "-c", help="Candidate side, as --baseline (default: the other side)."
        ),
    ] = None,
    store: StoreOption = DEFAULT_STORE,
    run_id: Annotated[
        int | None, typer.Option("--run", help="Run id (default: the latest complete run).")
    ] = None,
    output_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            help="terminal (default), json, markdown, junit, github or html.",
        ),
    ] = None,
    output: Annotated[
        list[str] | None,
        typer.Option(
            "--output",
            "-o",
            help="Write a report to FILE (format from --format, else from the extension: .json .md "
            ".xml .html .txt), FORMAT:FILE, or - for stdout. Repeatable.",
        ),
    ] = None,
    fail_on: Annotated[
        str | None,
        typer.Option(
            help="Exit 1 when a finding reaches this severity: info, warning, error (default), never."
        ),
    ] = None,
    min_effect: Annotated[
        float | None, typer.Option(help="Smallest timing change that counts (default 0.10 = 10%).")
    ] = None,
    min_delta_ms: Annotated[
        float | None,
        typer.Option(help="Smallest change of the median that counts, in ms (default 0.01)."),
    ] = None,
    select: Annotated[
        list[str] | None,
        typer.Option(
            help="Only these rules: codes, prefixes (PS1), names or families. Repeatable."
        ),
    ] = None,
    ignore: Annotated[
        list[str] | None, typer.Option(help="Skip these rules (as --select). Repeatable.")
    ] = None,
    rule_option: Annotated[
        list[str] | None,
        typer.Option(
            "--rule-option", help="RULE.OPTION=VALUE, e.g. PS101.near_tie=0.03. Repeatable."
        ),
    ] = None,
    approved: Annotated[
        Path | None,
        typer.Option(
            help="Approved-plans file (planshift approve): flag plans not in it (PS600); "
            "default: planshift.lock when the current directory has one."
        ),
    ] = None,
    noise: Annotated[
        str,
        typer.Option(
            help="A/A noise floors: auto (latest `planshift noise` run), off, or a run id."
        ),
    ] = "auto",
    config: ConfigOption = None,
    query: Annotated[str | None, typer.Option("--query", "-q", help="Only this query.")] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show unchanged queries too.")
    ] = False,
    save: Annotated[
        bool, typer.Option("--save", help="Keep the comparison and its findings in the store.")
    ] = False,
    lake: LakeOption = None,
    host: Annotated[
        str | None, typer.Option("--host", help="With --lake: the host whose windows to compare.")
    ] = None,
    busy_host: Annotated[
        str | None,
        typer.Option(
            help="Verdicts a busy host put at risk (PS203): warn (default), inconclusive, or fail.",
        ),
    ] = None,
) -> None:
    """Compare two sides query by query; exit 1 when findings reach --fail-on."""
    from detector.engine.comparison.config import load_config
    from detector.jobs.gate import compare_options
    from detector.jobs.lake import store_or_lake
    from detector.jobs.run import compare_and_report

    with user_errors():
        settings = load_config(config)
        if approved is None and settings.approved is None and DEFAULT_LOCK.is_file():
            approved = DEFAULT_LOCK
            progress.print(
                f"approved plans: {DEFAULT_LOCK} in the current directory (PS600 flags plans not in "
                "it; --approved FILE for another)"
            )
        options = compare_options(
            settings,
            min_effect=min_effect,
            select=select,
            ignore=ignore,
            approved=approved,
            noise=noise,
            rule_options=rule_option or [],
            query=query,
            min_delta_ms=min_delta_ms,
            busy_host=busy_host,
        )
        if lake is not None and (host is None or save):
            raise PlanshiftError(
                "--lake compares the time windows of one host, and keeps nothing",
                "add --host NAME (see `planshift fleet --lake ...`), without --save",
            )
        chosen = store if store != DEFAULT_STORE or settings.store is None else settings.store
        with store_or_lake(chosen, lake, host, None, None) as path:
            worst = compare_and_report(
                store_path=path,
                baseline=baseline,
                candidate=candidate,
                run_id=run_id,
                output_format=output_format,
                outputs=output or [],
                fail_on=fail_on or settings.fail_on,
                options=options,
                verbose=verbose,
                console=out,
                notes=progress,
                save=save,
            )
        exit_code = failing(worst, fail_on or settings.fail_on)
    raise typer.Exit(exit_code)


def failing(worst: str | None, fail_on: str) -> int:
    from detector.model import Severity
    from detector.reports import gate_severity

    gate = gate_severity(fail_on)
    return 1 if gate is not None and worst is not None and Severity(worst).rank >= gate.rank else 0


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
    from detector.jobs.run import run_demo

    with user_errors():
        run_demo(
            store_path=store,
            workload=workload,
            repetitions=repetitions,
            console=out,
            progress_console=progress,
        )
