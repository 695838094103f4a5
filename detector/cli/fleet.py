"""`planshift fleet`: which hosts of a lake (or log sources of a store) switched plan, per query."""

from __future__ import annotations

from typing import Annotated

import typer

from detector.cli.common import (
    DEFAULT_STORE,
    AsOfOption,
    FormatOption,
    LakeOption,
    SinceOption,
    StoreOption,
    UntilOption,
    check_format,
    out,
    print_json,
    user_errors,
)


def fleet(
    lake: LakeOption = None,
    store: StoreOption = DEFAULT_STORE,
    query: Annotated[
        str | None,
        typer.Option("--query", "-q", help="Query key (or its prefix), name or SQL words."),
    ] = None,
    since: SinceOption = None,
    until: UntilOption = None,
    source: Annotated[
        list[str] | None, typer.Option("--source", help="Only this host. Repeatable.")
    ] = None,
    output_format: FormatOption = "terminal",
    as_of: AsOfOption = None,
) -> None:
    """Per query, the hosts whose plan flipped in the window, with the medians around each flip."""
    from detector.jobs.lake import fleet_report

    as_json = check_format(output_format)
    with user_errors():
        queries, hosts = fleet_report(
            store=store, lake=lake, hosts=source or [], query=query, since=since, until=until,
            as_of=as_of,
        )  # fmt: skip
    if as_json:
        from detector.reports.fleet import fleet_document

        print_json(fleet_document(queries, hosts))
        return
    from detector.reports.fleet import render_fleet

    render_fleet(queries, len(hosts), out)
