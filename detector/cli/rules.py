"""`planshift rules`: the rule catalog, or one rule's documentation and file."""

from __future__ import annotations

from typing import Annotated

import typer

from detector.cli.common import (
    FormatOption,
    check_format,
    fail,
    out,
    print_json,
)
from detector.errors import PlanshiftError
from detector.reports.tables import table


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
