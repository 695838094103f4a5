"""`planshift compare`: compare two sides of a store, report and gate."""

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
    from detector.jobs.compare import compare_and_report
    from detector.jobs.compare_options import compare_options
    from detector.jobs.lake import store_or_lake

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
