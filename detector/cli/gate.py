"""`planshift approve`, `noise` and `calibrate` commands: registered on the app of detector.cli.app."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from detector.cli.common import (
    DEFAULT_STORE,
    FormatOption,
    StoreOption,
    check_format,
    out,
    print_json,
    progress,
    user_errors,
)


def approve(
    store: StoreOption = DEFAULT_STORE,
    target: Annotated[
        str | None, typer.Option("--target", "-t", help="Whose plans to approve (NAME or NAME@RUN).")
    ] = None,
    run_id: Annotated[int | None, typer.Option("--run", help="Run id (default: the latest complete run).")] = None,
    lock: Annotated[Path, typer.Option("--file", help="Approved-plans file to write.")] = Path("planshift.lock"),
    update: Annotated[bool, typer.Option("--update", help="Accept changes to an existing file.")] = False,
) -> None:
    """Record the plans a target uses now as approved (a lock file to commit and review)."""
    from detector.jobs.gate import approve as record

    with user_errors():
        plans, added, removed = record(
            store_path=store, target=target, run_id=run_id, lock=lock, update=update
        )
    out.print(f"{lock}: {plans} approved plans ({added} added, {removed} removed)", markup=False)


def noise(
    workload: Annotated[Path, typer.Argument(help="Workload file (TOML).")],
    store: StoreOption = DEFAULT_STORE,
    target: Annotated[str | None, typer.Option("--target", "-t", help="Server to calibrate.")] = None,
    variant: Annotated[str | None, typer.Option(help="Variant to run twice (default: the first).")] = None,
    repetitions: Annotated[int | None, typer.Option(help="Measured executions per query and side.")] = None,
    pg_bin: Annotated[list[Path] | None, typer.Option("--pg-bin", help="PostgreSQL bin directory.")] = None,
    output_format: FormatOption = "terminal",
) -> None:
    """A/A calibration: run one variant twice, interleaved; compare uses the noise floors."""
    from detector.engine.comparison.query_pairs import point_order
    from detector.jobs.gate import run_noise
    from detector.reports.tables import table

    def label_order(label: str) -> tuple[str, tuple[int, float, str]]:
        name, _, point = label.partition(" [")
        return (name, point_order(point.rstrip("]") or None))

    as_json = check_format(output_format)
    with user_errors():
        run_id, floors = run_noise(
            workload_path=workload,
            store_path=store,
            target=target,
            variant=variant,
            repetitions=repetitions,
            pg_bins=pg_bin or [],
            console=progress,
        )
    if as_json:
        from detector.reports.listing_json import noise_document

        print_json(noise_document(run_id, floors))
        return
    rows = [(label, f"{floor:.1%}") for label, floor in sorted(floors.items(), key=lambda kv: label_order(kv[0]))]
    title = f"A/A run {run_id}: how far the 95% CI of the effect reaches"
    out.print(table(("query", "noise floor"), rows, numeric=[1], title=title))


def calibrate(
    store: StoreOption = DEFAULT_STORE,
    rounds: Annotated[int, typer.Option(help="Probe rounds; the medians are kept.")] = 5,
    force: Annotated[
        bool, typer.Option("--force", help="Record the baseline even when the host is busy.")
    ] = False,
    output_format: FormatOption = "terminal",
) -> None:
    """Record this host's quiet baseline: 8 KiB reads from the page cache and the disk, a CPU loop.

    Runs on this host are held against it: compare shows the run's probe beside it and calls
    the host busy at 2x."""
    from detector.jobs.gate import calibrate_host

    as_json = check_format(output_format)
    with user_errors():
        baseline = calibrate_host(store_path=store, rounds=rounds, force=force)
    if as_json:
        print_json(
            {
                "format_version": 1,
                "host": baseline.host,
                "measured_at": baseline.measured_at.isoformat(),
                "read_warm_us": baseline.read_warm_us,
                "read_cold_us": baseline.read_cold_us,
                "cpu_loop_ms": baseline.cpu_loop_ms,
                "load_1min": baseline.load1,
                "cpus": baseline.cpus,
                "forced": baseline.forced,
            }
        )
        return
    cold = "n/a (tmpfs)" if baseline.read_cold_us is None else f"{baseline.read_cold_us:.3g} us"
    forced = " (forced: the host was busy)" if baseline.forced else ""
    out.print(
        f"host {baseline.host} ({baseline.cpus} CPUs, load {baseline.load1}){forced}: "
        f"page-cache read {baseline.read_warm_us:.3g} us, disk read {cold}, CPU loop "
        f"{baseline.cpu_loop_ms:.3g} ms; stored in {store} as its quiet baseline",
        markup=False,
    )
