"""Plan-shape census as a plan diagram (plan shapes per version x setting x sweep point).

One diagram per query, drawn as Picasso draws an optimizer's plan diagrams: a row per target
(or comparison side), a column per sweep point, each cell in the colour of the plan shape that
ran there (stripes by share when several did), and a legend drawing each shape as a tree of its
nodes. Built from a comparison's sweep (two sides) or from `planshift census` (any number of
targets): `render_census_html(build_census(...))` is a self-contained page of those diagrams.
Laid out here, drawn by templates/diagram.svg.j2 (the page: templates/census.html.j2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from detector.engine.census import QueryCensus, _letter
from detector.engine.sweeps import SweepGroup
from detector.reports.common import fmt_tick
from detector.reports.comparison.html_plan_diagram import (
    CHAR_WIDTH,
    DrawnNode,
    parse_signature,
    shape_colour,
    text_colour,
    tree_nodes,
    tree_size,
)
from detector.reports.html_env import render_page


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


def shape_letters(grid: CensusGrid) -> dict[str, str]:
    """Each plan signature's letter in the diagram (A: the most executions)."""
    return {signature: _letter(i) for i, signature in enumerate(_shape_totals(grid))}


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


@dataclass(frozen=True)
class Stripe:
    x: float
    width: float
    colour: str


@dataclass(frozen=True)
class Cell:
    x: float
    y: float
    width: float
    title: str
    stripes: tuple[Stripe, ...]  # none: nothing ran there
    letter: str = ""  # the most frequent shape's letter
    mark: str = ""  # the letter, with * when several shapes ran
    text_colour: str = ""


@dataclass(frozen=True)
class LegendShape:
    letter: str
    x: float
    y: float
    colour: str
    executions: int
    signature: str
    nodes: tuple[DrawnNode, ...]


@dataclass(frozen=True)
class Diagram:
    chart_id: str
    name: str
    width: float
    height: float
    label_x: float
    rows: tuple[tuple[float, str, str], ...]  # (y, cut name, full name) per target
    cells: tuple[Cell, ...]
    ticks: tuple[tuple[float, str], ...]  # (x, text) per sweep point
    param: tuple[float, float, str] | None  # the parameter's name under the ticks
    legend: tuple[LegendShape, ...]
    cell_height: int = CELL_H


def diagram(grid: CensusGrid, chart_id: str) -> Diagram:
    """A plan diagram (as Picasso draws an optimizer's): a cell per target and sweep point in the
    colour of the plan shape it ran (stripes by share when it ran several), and a legend that
    draws each shape as a tree of its nodes (templates/diagram.svg.j2 draws it)."""
    totals = _shape_totals(grid)
    shapes = list(totals)
    found = _cells(grid, shapes)
    targets = list(dict.fromkeys(target for target, _ in grid.rows))
    label_chars = min(max((len(t) for t in targets), default=4), LABEL_CHARS)
    label_w = label_chars * SANS_CHAR_WIDTH + 20
    widest_tick = max((len(_tick(c)) for c in grid.columns), default=1) * CHAR_WIDTH + 8
    cell_w = min(140.0, max(30.0, min(64.0, 760 / max(len(grid.columns), 1)), widest_tick))
    rows, cells = [], []
    for row, target in enumerate(targets):
        top = 8 + row * CELL_H
        rows.append((top + CELL_H / 2 + 4, _cut(target), target))
        for column, point in enumerate(grid.columns):
            x = label_w + column * cell_w
            cells.append(_cell(found.get((target, column), []), target, point, x, top, cell_w))
    bottom = 8 + len(targets) * CELL_H
    grid_w = label_w + len(grid.columns) * cell_w
    swept = any(point != "-" for point in grid.columns)  # "-": a query without sweep points
    ticks = tuple(
        (label_w + (column + 0.5) * cell_w, _tick(point))
        for column, point in enumerate(grid.columns if swept else ())
    )
    param = None
    if swept:
        param = (label_w + (grid_w - label_w) / 2, bottom + 32, grid.param)
        bottom += 32
    legend, width, height = _legend(totals, max(grid_w, 900.0), bottom + 20)
    return Diagram(
        chart_id, grid.name, max(width, grid_w), height, label_w - 8, tuple(rows), tuple(cells),
        ticks, param, tuple(legend),
    )  # fmt: skip


def _cut(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _cell(
    found: list[tuple[int, int]], target: str, point: str, x: float, y: float, width: float
) -> Cell:
    total = sum(count for _, count in found)
    if not total:
        return Cell(x + 1, y + 1, width - 2, f"{target} at {point}: no execution", ())
    stripes, left = [], x + 1
    for index, count in found:
        share = (width - 2) * count / total
        stripes.append(Stripe(left, share, shape_colour(index)))
        left += share
    first = found[0][0]
    title = ", ".join(f"{_letter(i)} {count}" for i, count in found)
    return Cell(
        x + 1, y + 1, width - 2, f"{target} at {point}: {title} executions", tuple(stripes),
        _letter(first), _letter(first) + ("*" if len(found) > 1 else ""),
        text_colour(shape_colour(first)),
    )  # fmt: skip


def _legend(
    totals: dict[str, int], budget: float, top: float
) -> tuple[list[LegendShape], float, float]:
    """Each shape's swatch, letter, executions and tree, laid out left to right, wrapping."""
    entries, x, y, row_h, width = [], 0.0, top, 0.0, 0.0
    for index, signature in enumerate(totals):
        tree = parse_signature(signature)
        tree_w, tree_h = tree_size(tree)
        entry_w = max(tree_w, 150.0)
        if x and x + entry_w > budget:
            x, y, row_h = 0.0, y + row_h + 14, 0.0
        entries.append(
            LegendShape(_letter(index), x, y, shape_colour(index), totals[signature], signature,
                        tuple(tree_nodes(tree, x, y + 20)))
        )  # fmt: skip
        row_h = max(row_h, 20 + tree_h)
        width = max(width, x + entry_w)
        x += entry_w + 24
    return entries, width, y + row_h + 6


@dataclass(frozen=True)
class CensusBlock:
    name: str
    diagram: Diagram
    switches: tuple[tuple[str, str, str, str, str], ...]  # describe, from/to letter, signatures


def render_census_html(censuses: Sequence[QueryCensus]) -> str:
    """A self-contained page: one plan diagram per query, with its switch points."""
    blocks = []
    for index, census in enumerate(censuses):
        switches = tuple(
            (s.describe(), census.letter(s.from_signature), census.letter(s.to_signature),
             s.from_signature, s.to_signature)
            for s in census.switches()
        )  # fmt: skip
        grid = diagram(grid_from_census(census), f"census{index}")
        blocks.append(CensusBlock(census.query_name, grid, switches))
    targets = sorted({t for c in censuses for t in c.targets})
    points = {p for c in censuses for p in c.points if p}
    return render_page(
        "census.html.j2", script=False, blocks=blocks, targets=targets, points=len(points),
        note=DIAGRAM_NOTE,
    )  # fmt: skip
