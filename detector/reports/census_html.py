"""Plan-shape census as a plan diagram (plan shapes per version x setting x sweep point).

One diagram per query, drawn as Picasso draws an optimizer's plan diagrams: a row per target
(or comparison side), a column per sweep point, each cell in the colour of the plan shape that
ran there (stripes by share when several did), and a legend drawing each shape as a tree of its
nodes. Built from a comparison's sweep (two sides) or from `planshift census` (any number of
targets): `render_census_html(build_census(...))` is a self-contained page of those diagrams.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from detector.engine.census import QueryCensus, _letter
from detector.reports.common import SweepGroup, fmt_tick
from detector.reports.escape import for_html
from detector.reports.html_assets import CSS, csp
from detector.reports.html_plan_diagram import (
    CHAR_WIDTH,
    parse_signature,
    shape_colour,
    text_colour,
    tree_size,
    tree_svg,
)
from detector.version import __version__


@dataclass(frozen=True)
class CensusGrid:
    name: str
    param: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, str], ...]  # (target, plan signature)
    counts: tuple[tuple[int, ...], ...]  # [row][column]
    shares: tuple[tuple[float, ...], ...]  # count / the target's executions at that column


CELL_H = 24  # px per target row of a plan diagram
SANS_CHAR_WIDTH = 7.4  # px per character of a 12px sans-serif label, wide enough for most fonts
LABEL_CHARS = 32  # longer target names are cut with an ellipsis (the full name is the tooltip)
DIAGRAM_NOTE = (
    "a row per target, a column per point; each cell has the colour of the plan shape that ran "
    "there (stripes by share, * when several did); the legend draws each shape's plan tree."
)


def _tick(text: str) -> str:
    value = text.partition("=")[2] or text
    try:
        return fmt_tick(float(value))
    except ValueError:
        return value


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


def _shape_totals(grid: CensusGrid) -> dict[str, int]:
    """Executions per signature, most first, then by text: the census's letters A, B, ..."""
    totals: dict[str, int] = {}
    for (_, signature), counts in zip(grid.rows, grid.counts, strict=True):
        totals[signature] = totals.get(signature, 0) + sum(counts)
    return dict(sorted(totals.items(), key=lambda item: (-item[1], item[0])))


def _cells(grid: CensusGrid, shapes: list[str]) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """(target, column) -> [(shape index, executions)], most executions first."""
    cells: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for (target, signature), counts in zip(grid.rows, grid.counts, strict=True):
        for column, count in enumerate(counts):
            if count:
                cells.setdefault((target, column), []).append((shapes.index(signature), count))
    for found in cells.values():
        found.sort(key=lambda item: (-item[1], item[0]))
    return cells


def diagram_svg(grid: CensusGrid, chart_id: str) -> str:
    """A plan diagram (as Picasso draws an optimizer's): a cell per target and sweep point in the
    colour of the plan shape it ran (stripes by share when it ran several), and a legend that
    draws each shape as a tree of its nodes."""
    totals = _shape_totals(grid)
    shapes = list(totals)
    cells = _cells(grid, shapes)
    targets = list(dict.fromkeys(target for target, _ in grid.rows))
    label_chars = min(max((len(t) for t in targets), default=4), LABEL_CHARS)
    label_w = label_chars * SANS_CHAR_WIDTH + 20
    widest_tick = max((len(_tick(c)) for c in grid.columns), default=1) * CHAR_WIDTH + 8
    cell_w = min(140.0, max(30.0, min(64.0, 760 / max(len(grid.columns), 1)), widest_tick))
    parts = []
    for row, target in enumerate(targets):
        top = 8 + row * CELL_H
        parts.append(
            f'<text x="{label_w - 8:.1f}" y="{top + CELL_H / 2 + 4:.1f}" text-anchor="end" '
            f'font-size="12"><title>{for_html(target)}</title>{for_html(_cut(target))}</text>'
        )
        for column, point in enumerate(grid.columns):
            parts.append(_cell(cells.get((target, column), []), target, point,
                               label_w + column * cell_w, top, cell_w))  # fmt: skip
    bottom = 8 + len(targets) * CELL_H
    grid_w = label_w + len(grid.columns) * cell_w
    swept = any(point != "-" for point in grid.columns)  # "-": a query without sweep points
    for column, point in enumerate(grid.columns if swept else ()):
        parts.append(
            f'<text x="{label_w + (column + 0.5) * cell_w:.1f}" y="{bottom + 15:.1f}" '
            f'text-anchor="middle" font-size="11">{for_html(_tick(point))}</text>'
        )
    if swept:
        parts.append(
            f'<text x="{label_w + (grid_w - label_w) / 2:.1f}" y="{bottom + 32:.1f}" '
            f'text-anchor="middle" font-size="12" fill="#666">{for_html(grid.param)}</text>'
        )
        bottom += 32
    legend, width, height = _legend(totals, max(grid_w, 900.0), bottom + 20)
    width = max(width, grid_w)
    return (
        f'<svg class="chart" data-kind="plan-diagram" role="img" data-chart="{chart_id}" '
        f'aria-label="plan diagram of {for_html(grid.name)}" viewBox="0 0 {width:.0f} '
        f'{height:.0f}" width="{width:.0f}" height="{height:.0f}" '
        f'xmlns="http://www.w3.org/2000/svg" font-family="system-ui, sans-serif">'
        f"{''.join(parts)}{legend}</svg>"
    )


def _cut(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _cell(
    found: list[tuple[int, int]],
    target: str,
    point: str,
    x: float,
    y: float,
    width: float,
) -> str:
    total = sum(count for _, count in found)
    if not total:
        return (
            f'<rect x="{x + 1:.1f}" y="{y + 1:.1f}" width="{width - 2:.1f}" height="{CELL_H - 2}" '
            f'fill="#f2f2f2"><title>{for_html(target)} at {for_html(point)}: no execution</title>'
            "</rect>"
        )
    stripes, left = [], x + 1
    for index, count in found:
        share = (width - 2) * count / total
        stripes.append(
            f'<rect x="{left:.1f}" y="{y + 1:.1f}" width="{share:.1f}" height="{CELL_H - 2}" '
            f'fill="{shape_colour(index)}"/>'
        )
        left += share
    first = found[0][0]
    mark = _letter(first) + ("*" if len(found) > 1 else "")
    title = ", ".join(f"{_letter(i)} {count}" for i, count in found)
    return (
        f'<g class="cell" data-shape="{_letter(first)}">'
        f"<title>{for_html(target)} at {for_html(point)}: {title} executions</title>"
        f'{"".join(stripes)}<text x="{x + width / 2:.1f}" y="{y + CELL_H / 2 + 4:.1f}" '
        f'text-anchor="middle" font-size="11" font-weight="600" '
        f'fill="{text_colour(shape_colour(first))}">{mark}</text></g>'
    )


def _legend(totals: dict[str, int], budget: float, top: float) -> tuple[str, float, float]:
    """Each shape's swatch, letter, executions and tree, laid out left to right, wrapping."""
    parts, x, y, row_h, width = [], 0.0, top, 0.0, 0.0
    for index, signature in enumerate(totals):
        tree = parse_signature(signature)
        tree_w, tree_h = tree_size(tree)
        entry_w = max(tree_w, 150.0)
        if x and x + entry_w > budget:
            x, y, row_h = 0.0, y + row_h + 14, 0.0
        colour, letter = shape_colour(index), _letter(index)
        parts.append(
            f'<g class="shape" data-shape="{letter}" data-nodes="{tree.size()}">'
            f"<title>{for_html(signature)}</title>"
            f'<rect x="{x:.1f}" y="{y:.1f}" width="14" height="14" fill="{colour}"/>'
            f'<text x="{x + 20:.1f}" y="{y + 11:.1f}" font-size="12"><tspan font-weight="700">'
            f"{letter}</tspan> {totals[signature]:,} executions</text>"
            f"{tree_svg(tree, x, y + 20, colour, letter)}</g>"
        )
        row_h = max(row_h, 20 + tree_h)
        width = max(width, x + entry_w)
        x += entry_w + 24
    return "".join(parts), width, y + row_h + 6


def render_census_html(censuses: Sequence[QueryCensus]) -> str:
    """A self-contained page: one plan diagram per query, with its switch points."""
    blocks = []
    for index, census in enumerate(censuses):
        switches = "".join(
            f"<li>{for_html(s.describe())}: <b>{census.letter(s.from_signature)}</b> → "
            f"<b>{census.letter(s.to_signature)}</b> (<code>{for_html(s.from_signature)}</code> → "
            f"<code>{for_html(s.to_signature)}</code>)</li>"
            for s in census.switches()
        )
        blocks.append(
            f"<h2>{for_html(census.query_name)}</h2>"
            f"{diagram_svg(grid_from_census(census), f'census{index}')}"
            + (f"<ul>{switches}</ul>" if switches else "<p class=note>no switch point</p>")
        )
    targets = sorted({t for c in censuses for t in c.targets})
    points = {p for c in censuses for p in c.points if p}
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"{csp('')}<title>planshift census</title><style>{CSS}</style></head><body><header>"
        f"<h1>planshift census</h1><div class=meta>{len(targets)} targets: "
        f"{for_html(', '.join(targets))}; {len(points)} sweep points</div></header>"
        f"<main>{''.join(blocks)}<p class=note>{for_html(DIAGRAM_NOTE)}</p></main>"
        f"<footer>planshift {for_html(__version__)}: a self-contained page (no network).</footer>"
        "</body></html>\n"
    )
