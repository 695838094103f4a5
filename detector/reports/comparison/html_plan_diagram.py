"""Plan shapes drawn as small trees (inline SVG), one colour per shape.

A census knows a shape by its one-line signature (`detector.model.fingerprint.signature`):
`Aggregate > BitmapHeapScan(t) > BitmapIndexScan(t_pkey)`, with `{a; b}` for several children.
`parse_signature` reads that grammar back into a tree of node labels (brackets and parentheses
protect relation names; a signature it cannot read is one node, never an error), and `tree_nodes`
lays the tree out indented like EXPLAIN's text output, with connectors from each parent (drawn
by templates/diagram.svg.j2).
"""

from __future__ import annotations

from dataclasses import dataclass

#: One colour per plan shape, in the census's letter order (A, B, ...): Tableau 10.
SHAPE_COLOURS = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip
DARK_TEXT = {"#edc948", "#76b7b2", "#ff9da7", "#bab0ac", "#f28e2b"}  # light fills
CHAR_WIDTH = 6.7  # px per character of an 11px monospace label: wide enough for common fonts
ROW = 18  # px per node row
INDENT = 14  # px per tree level
LABEL_CHARS = 56  # longer node labels are cut with an ellipsis (the full label is the tooltip)


@dataclass(frozen=True)
class ShapeTree:
    label: str
    children: tuple[ShapeTree, ...] = ()

    def size(self) -> int:
        return 1 + sum(child.size() for child in self.children)

    def rows(self, depth: int = 0) -> list[tuple[int, ShapeTree]]:
        """(depth, node) in pre-order: the drawing's rows."""
        out = [(depth, self)]
        for child in self.children:
            out.extend(child.rows(depth + 1))
        return out


def shape_colour(index: int) -> str:
    return SHAPE_COLOURS[index % len(SHAPE_COLOURS)]


def text_colour(fill: str) -> str:
    return "#1d1d1d" if fill in DARK_TEXT else "#ffffff"


def parse_signature(signature: str) -> ShapeTree:
    """The tree a signature was printed from; an unreadable signature is one node."""
    reader = _SignatureReader(signature)
    try:
        tree = reader.chain()
    except RecursionError:
        return ShapeTree(signature)
    return tree if reader.pos == len(signature) else ShapeTree(signature)


class _SignatureReader:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def _at(self, token: str) -> bool:
        return self.text.startswith(token, self.pos)

    def label(self) -> str:
        start, depth = self.pos, 0
        while self.pos < len(self.text):
            if depth == 0 and (
                self._at(" > ") or self._at(" {") or self._at("; ") or self._at("}")
            ):
                break
            char = self.text[self.pos]
            if char in "([":
                depth += 1
            elif char in ")]":
                depth = max(0, depth - 1)
            self.pos += 1
        return self.text[start : self.pos]

    def chain(self) -> ShapeTree:
        label = self.label()
        if self._at(" > "):
            self.pos += 3
            return ShapeTree(label, (self.chain(),))
        if self._at(" {"):
            self.pos += 2
            children = [self.chain()]
            while self._at("; "):
                self.pos += 2
                children.append(self.chain())
            if self._at("}"):
                self.pos += 1
            return ShapeTree(label, tuple(children))
        return ShapeTree(label)


def _cut(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def tree_size(tree: ShapeTree) -> tuple[float, float]:
    """(width, height) in px of `tree_svg`'s drawing."""
    rows = tree.rows()
    width = max(depth * INDENT + 14 + len(_cut(node.label)) * CHAR_WIDTH for depth, node in rows)
    return width, len(rows) * ROW


@dataclass(frozen=True)
class DrawnNode:
    """One node of a drawn plan tree: its dot, its label, the edge from its parent."""

    cx: float
    cy: float
    x: float  # the label's start
    label: str  # cut to LABEL_CHARS
    full: str  # the whole label (tooltip)
    edge: str  # SVG path from the parent's stem; "" for the root


def tree_nodes(tree: ShapeTree, x: float, y: float) -> list[DrawnNode]:
    """The tree's nodes with their top left corner at (x, y), in pre-order (one row each)."""
    out = []
    parents: list[float] = []  # the y of the last node drawn at each depth
    for row, (depth, node) in enumerate(tree.rows()):
        middle = y + row * ROW + ROW / 2
        left = x + depth * INDENT
        del parents[depth:]
        edge = ""
        if depth:
            stem = x + (depth - 1) * INDENT + 4
            edge = f"M{stem:.1f},{parents[-1] + 4:.1f} V{middle:.1f} H{left:.1f}"
        parents.append(middle)
        out.append(DrawnNode(left + 4, middle, left + 12, _cut(node.label), node.label, edge))
    return out
