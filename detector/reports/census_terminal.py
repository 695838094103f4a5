"""`planshift census` on a terminal: per query, targets x sweep points -> plan-shape counts."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from detector.engine.census import QueryCensus
from detector.reports.escape import for_markup, single_line


def cell(census: QueryCensus, target: str, point: str | None) -> str:
    counter = census.counts.get((target, point))
    if not counter:
        return "-"
    ordered = sorted(counter.items(), key=lambda kv: census.signatures.index(kv[0]))
    return " ".join(f"{census.letter(sig)} {n}" for sig, n in ordered)


def render_census(censuses: Sequence[QueryCensus], console: Console) -> None:
    for census in censuses:
        title = for_markup(census.query_name)
        table = Table(title=title, title_justify="left", title_style="bold")
        table.add_column("target")
        for point in census.points:
            table.add_column(for_markup(point or "samples"), justify="right")
        for target in census.targets:
            table.add_row(for_markup(target), *(cell(census, target, p) for p in census.points))
        console.print(table)
        for signature in census.signatures:
            console.print(single_line(f"  {census.letter(signature)} = {signature}"), markup=False)
        for switch in census.switches():
            letters = (
                f"{census.letter(switch.from_signature)} -> {census.letter(switch.to_signature)}"
            )
            console.print(single_line(f"  {switch.describe()}: {letters}"), markup=False)
        console.print()
