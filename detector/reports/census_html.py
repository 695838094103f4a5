"""Plan-shape census as a heat map (seed 003's table: plan shapes per version x setting x point).

One grid per query: a row per target (or comparison side) and plan shape, a column per sweep
point; the colour is the share of that target's executions at the point, the text the count.
Built from a comparison's sweep (two sides) or from `planshift census` (any number of targets):
`render_census_html(build_census(...))` is a self-contained page of those heat maps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from detector.engine.census import QueryCensus
from detector.reports.charts import _figure, _rc, _short, to_svg
from detector.reports.common import SweepGroup, fmt_tick
from detector.reports.escape import for_html, for_matplotlib
from detector.reports.html_assets import CSS
from detector.version import __version__


@dataclass(frozen=True)
class CensusGrid:
    name: str
    param: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, str], ...]  # (target, plan signature)
    counts: tuple[tuple[int, ...], ...]  # [row][column]
    shares: tuple[tuple[float, ...], ...]  # count / the target's executions at that column


def _tick(text: str) -> str:
    value = text.partition("=")[2] or text
    try:
        return fmt_tick(float(value))
    except ValueError:
        return text


def grid_from_sweep(group: SweepGroup) -> CensusGrid:
    first = group.points[0].query.baseline.label
    rows: set[tuple[str, str]] = set()
    cells: dict[tuple[str, str, int], tuple[int, float]] = {}
    for col, point in enumerate(group.points):
        for side in (point.query.baseline, point.query.candidate):
            for plan in side.plans:
                rows.add((side.label, plan.signature))
                cells[(side.label, plan.signature, col)] = (
                    plan.samples,
                    plan.samples / max(side.samples, 1),
                )
    ordered = tuple(sorted(rows, key=lambda r: (r[0] != first, r[0], r[1])))
    return _grid(group.name, group.param, tuple(p.text for p in group.points), ordered, cells)


def grid_from_census(census: QueryCensus) -> CensusGrid:
    columns = tuple("-" if p is None else p for p in census.points)
    params = {p.partition("=")[0] for p in census.points if p is not None}
    cells: dict[tuple[str, str, int], tuple[int, float]] = {}
    rows: set[tuple[str, str]] = set()
    for (target, point), counter in census.counts.items():
        col = census.points.index(point)
        total = sum(counter.values())
        for signature, count in counter.items():
            rows.add((target, signature))
            cells[(target, signature, col)] = (count, count / max(total, 1))
    order = {t: i for i, t in enumerate(census.targets)}
    ordered = tuple(sorted(rows, key=lambda r: (order.get(r[0], len(order)), r[0],
                                                census.signatures.index(r[1]))))  # fmt: skip
    param = params.pop() if len(params) == 1 else "point"
    return _grid(census.query_name, param, columns, ordered, cells)


def _grid(
    name: str,
    param: str,
    columns: tuple[str, ...],
    rows: tuple[tuple[str, str], ...],
    cells: dict[tuple[str, str, int], tuple[int, float]],
) -> CensusGrid:
    empty = (0, 0.0)
    counts = tuple(
        tuple(cells.get((t, s, c), empty)[0] for c in range(len(columns))) for t, s in rows
    )
    shares = tuple(
        tuple(cells.get((t, s, c), empty)[1] for c in range(len(columns))) for t, s in rows
    )
    return CensusGrid(name, param, columns, rows, counts, shares)


def heatmap_svg(grid: CensusGrid, chart_id: str) -> str:
    share = np.asarray(grid.shares, dtype=float).reshape(len(grid.rows), len(grid.columns))
    with _rc():
        fig = _figure(7.4, 0.9 + 0.32 * len(grid.rows))
        ax = fig.add_subplot()
        ax.grid(False)
        ax.imshow(share, cmap="Blues", vmin=0, vmax=1, aspect="auto")
        for r, row in enumerate(grid.counts):
            for c, count in enumerate(row):
                color = "white" if share[r, c] > 0.6 else "#333333"
                text = str(count) if count else "·"
                ax.text(c, r, text, ha="center", va="center", fontsize=8, color=color)
        ax.set_xticks(range(len(grid.columns)), [for_matplotlib(_tick(c)) for c in grid.columns])
        rows = [for_matplotlib(f"{t}: {_short(s, 60)}") for t, s in grid.rows]
        ax.set_yticks(range(len(grid.rows)), rows)
        ax.set_xlabel(for_matplotlib(grid.param))
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
    return to_svg(fig, chart_id)


def render_census_html(censuses: Sequence[QueryCensus]) -> str:
    """A self-contained page: one census heat map per query, with its switch points."""
    blocks = []
    for index, census in enumerate(censuses):
        switches = "".join(
            f"<li>{for_html(s.describe())}: <code>{for_html(s.from_signature)}</code> → "
            f"<code>{for_html(s.to_signature)}</code></li>"
            for s in census.switches()
        )
        blocks.append(
            f"<h2>{for_html(census.query_name)}</h2>"
            f"{heatmap_svg(grid_from_census(census), f'census{index}')}"
            + (f"<ul>{switches}</ul>" if switches else "<p class=note>no switch point</p>")
        )
    targets = sorted({t for c in censuses for t in c.targets})
    points = {p for c in censuses for p in c.points if p}
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>planshift census</title><style>{CSS}</style></head><body><header>"
        f"<h1>planshift census</h1><div class=meta>{len(targets)} targets: "
        f"{for_html(', '.join(targets))}; {len(points)} sweep points</div></header>"
        f"<main>{''.join(blocks)}<p class=note>executions per target and plan shape at each "
        "point; colour = share of the target's executions there.</p></main>"
        f"<footer>planshift {for_html(__version__)}: a self-contained page (no network).</footer>"
        "</body></html>\n"
    )
