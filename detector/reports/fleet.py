"""The fleet view as text and as JSON (format_version 1, schema fleet-v1.schema.json)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console

from detector.engine.fleet import FleetQuery
from detector.model.units import fmt_ms, fmt_ratio
from detector.reports.escape import single_line

FORMAT_VERSION = 1


def _change(before: float | None, after: float | None) -> str:
    if before and after is not None:
        ratio = after / before
        text = f"{fmt_ratio(ratio)}x slower" if ratio >= 1 else f"{fmt_ratio(1 / ratio)}x faster"
        return f"median {fmt_ms(before)} -> {fmt_ms(after)} ms ({text})"
    return f"median {fmt_ms(before)} -> {fmt_ms(after)} ms"


def render_fleet(queries: Sequence[FleetQuery], hosts: int, console: Console) -> None:
    if not queries:
        console.print(f"no plan flip on any of {hosts} hosts in the window", markup=False)
        return
    for query in queries:
        flipped = len({f.host for f in query.flips})
        console.print(
            single_line(f"{query.name}  [key {query.query_key}]: {flipped} of "
                        f"{query.hosts_seen} hosts switched plan"),
            markup=False, highlight=False,
        )  # fmt: skip
        for flip in query.flips:
            console.print(
                single_line(
                    f"  {flip.host}  {flip.at:%Y-%m-%d %H:%M:%S}  "
                    f"{_change(flip.before_median_ms, flip.after_median_ms)}  "
                    f"{flip.before_signature} -> {flip.after_signature}"
                ),
                markup=False,
                highlight=False,
            )


def fleet_document(queries: Sequence[FleetQuery], hosts: Sequence[str]) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "hosts": list(hosts),
        "queries": [
            {
                "query_key": q.query_key,
                "name": q.name,
                "hosts_seen": q.hosts_seen,
                "flips": [
                    {
                        "host": f.host,
                        "at": f.at.isoformat(),
                        "before": {
                            "signature": f.before_signature,
                            "median_ms": f.before_median_ms,
                        },
                        "after": {"signature": f.after_signature, "median_ms": f.after_median_ms},
                        "ratio": f.ratio,
                    }
                    for f in q.flips
                ],
            }
            for q in queries
        ],
    }
