"""`planshift runs/rules/census`: what there is, as tables or JSON (`--format json`)."""

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
    fail,
    out,
    print_json,
    user_errors,
)
from detector.errors import PlanshiftError
from detector.reports.tables import table


def runs(store: StoreOption = DEFAULT_STORE, output_format: FormatOption = "terminal") -> None:
    """List the runs in the store with their targets."""
    from detector.model.failures import failed_queries_text
    from detector.reports.listing_json import runs_document
    from detector.store import Store

    as_json = check_format(output_format)
    with user_errors(), Store(store, read_only=True) as db:
        records, targets, failed = db.runs(), db.targets(), db.failed_queries()
    if as_json:
        print_json(runs_document(records, targets, failed))
        return
    rows = [
        (record.run_id, record.label, str(record.started_at)[:19], record.status,
         ", ".join(t.name for t in targets if t.run_id == record.run_id))
        for record in records
    ]  # fmt: skip
    out.print(table(("run", "label", "started", "status", "targets"), rows, numeric=[0]))
    for record in records:
        if record.note:
            out.print(f"run {record.run_id}: {record.note}", markup=False)
        if record.run_id in failed:
            text = f"run {record.run_id}: {failed_queries_text(failed[record.run_id])}"
            out.print(text, markup=False)


def rules(
    code: Annotated[str | None, typer.Argument(help="Rule code or name.")] = None,
    output_format: FormatOption = "terminal",
) -> None:
    """List the rule catalog, or print one rule's documentation."""
    from detector.reports.listing_json import rules_document
    from rules import all_rules, get_rule

    as_json = check_format(output_format)
    if code is None:
        catalog = list(all_rules())
        if as_json:
            print_json(rules_document(catalog))
            return
        rows = [(r.code, r.name, r.severity.value, r.summary) for r in catalog]
        out.print(table(("code", "name", "severity", "summary"), rows))
        return
    try:
        rule = get_rule(code)
    except PlanshiftError as exc:
        fail(exc.message, exc.hint or "`planshift rules` lists the catalog")
    if as_json:
        print_json(rules_document([rule]))
        return
    out.print(
        f"[bold]{rule.code} {rule.name}[/] (family {rule.family}, default severity {rule.severity.value})"
    )
    out.print(f"file: {rule.file}", markup=False)
    out.print(rule.doc, markup=False)
    if rule.options:
        out.print(
            "options: " + ", ".join(f"{k} = {v!r}" for k, v in rule.options.items()), markup=False
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
        typer.Option("--output", "-o", help="Also write the census as an HTML page (plan diagram, self-contained)."),
    ] = None,
    output_format: FormatOption = "terminal",
) -> None:
    """Plan-shape census: samples per plan shape for every target and sweep point, and switch points."""
    from detector.jobs.run import census_from_store
    from detector.reports.census_json import census_document
    from detector.reports.census_terminal import render_census

    as_json = check_format(output_format)
    with user_errors():
        censuses = census_from_store(store, run_id, query, target or [])
    if as_json:
        print_json(census_document(censuses))
    else:
        render_census(censuses, out)
    if output is not None:
        from detector.reports.census_html import render_census_html

        output.write_text(render_census_html(censuses))
        err.print(f"census page written to {output}", markup=False)
