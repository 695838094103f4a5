"""`planshift noise`: an A/A run that gives each query its noise floor."""

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


def noise(
    workload: Annotated[Path, typer.Argument(help="Workload file (TOML).")],
    store: StoreOption = DEFAULT_STORE,
    target: Annotated[
        str | None, typer.Option("--target", "-t", help="Server to calibrate.")
    ] = None,
    variant: Annotated[
        str | None, typer.Option(help="Variant to run twice (default: the first).")
    ] = None,
    repetitions: Annotated[
        int | None, typer.Option(help="Measured executions per query and side.")
    ] = None,
    pg_bin: Annotated[
        list[Path] | None, typer.Option("--pg-bin", help="PostgreSQL bin directory.")
    ] = None,
    output_format: FormatOption = "terminal",
) -> None:
    """A/A calibration: run one variant twice, interleaved; compare uses the noise floors."""
    from detector.engine.comparison.query_pairs import point_order
    from detector.jobs.noise import run_noise
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
    rows = [
        (label, f"{floor:.1%}")
        for label, floor in sorted(floors.items(), key=lambda kv: label_order(kv[0]))
    ]
    title = f"A/A run {run_id}: how far the 95% CI of the effect reaches"
    out.print(table(("query", "noise floor"), rows, numeric=[1], title=title))
