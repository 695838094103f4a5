"""`planshift calibrate`: record this host's quiet baseline."""

from __future__ import annotations

from typing import Annotated

import typer

from detector.cli.common import (
    DEFAULT_STORE,
    FormatOption,
    StoreOption,
    check_format,
    out,
    print_json,
    user_errors,
)


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
    from detector.jobs.calibrate import calibrate_host

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
