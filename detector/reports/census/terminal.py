"""`planshift census` on a terminal: per query, targets x sweep points -> plan-shape counts."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from detector.engine.census import QueryCensus
from detector.reports.escape import single_line
from detector.reports.tables import table


def cell(census: QueryCensus, target: str, point: str | None) -> str:
    counter = census.counts.get((target, point))
    if not counter:
        return "-"
    ordered = sorted(counter.items(), key=lambda kv: census.signatures.index(kv[0]))
    return " ".join(f"{census.letter(sig)} {n}" for sig, n in ordered)


def render_census(censuses: Sequence[QueryCensus], console: Console) -> None:
    for census in censuses:
        header = ("target", *(point or "samples" for point in census.points))
        rows = [(t, *(cell(census, t, p) for p in census.points)) for t in census.targets]
        numeric = range(1, len(header))
        console.print(table(header, rows, numeric=numeric, title=single_line(census.query_name)))
        for signature in census.signatures:
            console.print(single_line(f"  {census.letter(signature)} = {signature}"), markup=False)
        for switch in census.switches():
            letters = (
                f"{census.letter(switch.from_signature)} -> {census.letter(switch.to_signature)}"
            )
            console.print(single_line(f"  {switch.describe()}: {letters}"), markup=False)
        console.print()
