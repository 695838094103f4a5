"""`planshift census`: which plan each target used, per query and sweep point."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from detector.cli.common import (
    DEFAULT_STORE,
    FormatOption,
    StoreOption,
    check_format,
    err,
    out,
    print_json,
    user_errors,
)


def census(
    store: StoreOption = DEFAULT_STORE,
    run_id: Annotated[
        int | None, typer.Option("--run", help="Run id (default: the latest complete run).")
    ] = None,
    query: Annotated[str | None, typer.Option("--query", "-q", help="Only this query.")] = None,
    target: Annotated[
        list[str] | None, typer.Option("--target", "-t", help="Only these targets. Repeatable.")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Also write the census as an HTML page (plan diagram, self-contained).",
        ),
    ] = None,
    output_format: FormatOption = "terminal",
) -> None:
    """Plan-shape census: samples per plan shape for every target and sweep point, and switch points."""
    from detector.jobs.census import census_from_store
    from detector.reports.census.json_doc import census_document
    from detector.reports.census.terminal import render_census

    as_json = check_format(output_format)
    with user_errors():
        censuses = census_from_store(store, run_id, query, target or [])
    if as_json:
        print_json(census_document(censuses))
    else:
        render_census(censuses, out)
    if output is not None:
        from detector.reports.census.html import render_census_html

        output.write_text(render_census_html(censuses))
        err.print(f"census page written to {output}", markup=False)
