"""`planshift approve`: write the plans a run used into the approved-plans lock file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from detector.cli.common import (
    DEFAULT_STORE,
    StoreOption,
    out,
    user_errors,
)


def approve(
    store: StoreOption = DEFAULT_STORE,
    target: Annotated[
        str | None,
        typer.Option("--target", "-t", help="Whose plans to approve (NAME or NAME@RUN)."),
    ] = None,
    run_id: Annotated[
        int | None, typer.Option("--run", help="Run id (default: the latest complete run).")
    ] = None,
    lock: Annotated[Path, typer.Option("--file", help="Approved-plans file to write.")] = Path(
        "planshift.lock"
    ),
    update: Annotated[
        bool, typer.Option("--update", help="Accept changes to an existing file.")
    ] = False,
) -> None:
    """Record the plans a target uses now as approved (a lock file to commit and review)."""
    from detector.jobs.approve import approve as record

    with user_errors():
        plans, added, removed = record(
            store_path=store, target=target, run_id=run_id, lock=lock, update=update
        )
    out.print(f"{lock}: {plans} approved plans ({added} added, {removed} removed)", markup=False)
