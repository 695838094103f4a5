"""Plan shapes drawn as small trees (inline SVG), one colour per shape.

A census knows a shape by its one-line signature (`detector.model.fingerprint.signature`):
`Aggregate > BitmapHeapScan(t) > BitmapIndexScan(t_pkey)`, with `{a; b}` for several children.
`parse_signature` reads that grammar back into a tree of node labels (brackets and parentheses
protect relation names; a signature it cannot read is one node, never an error), and `tree_svg`
draws the tree indented like EXPLAIN's text output, with connectors from each parent.
"""

from __future__ import annotations

from dataclasses import dataclass

from detector.reports.escape import for_html

#: One colour per plan shape, in the census's letter order (A, B, ...): Tableau 10.
SHAPE_COLOURS = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip
DARK_TEXT = {"#edc948", "#76b7b2", "#ff9da7", "#bab0ac", "#f28e2b"}  # light fills
FONT = "ui-monospace, Menlo, Consolas, monospace"
CHAR_WIDTH = 6.7  # px per character of FONT at FONT_SIZE: wide enough for common monospace fonts
FONT_SIZE = 11
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


def tree_svg(tree: ShapeTree, x: float, y: float, colour: str, letter: str) -> str:
    """The tree as SVG elements, its top left corner at (x, y): one `g.pnode` per plan node."""
    parts = []
    parents: list[float] = []  # the y of the last node drawn at each depth
    for row, (depth, node) in enumerate(tree.rows()):
        top = y + row * ROW
        middle = top + ROW / 2
        left = x + depth * INDENT
        del parents[depth:]
        if depth:
            stem = x + (depth - 1) * INDENT + 4
            parts.append(
                f'<path class="edge" d="M{stem:.1f},{parents[-1] + 4:.1f} V{middle:.1f} '
                f'H{left:.1f}" fill="none" stroke="#9a9a9a" stroke-width="1"/>'
            )
        parents.append(middle)
        parts.append(
            f'<g class="pnode" data-shape="{for_html(letter)}">'
            f"<title>{for_html(node.label)}</title>"
            f'<circle cx="{left + 4:.1f}" cy="{middle:.1f}" r="4" fill="{colour}"/>'
            f'<text x="{left + 12:.1f}" y="{middle + 4:.1f}" font-family="{FONT}" '
            f'font-size="{FONT_SIZE}">{for_html(_cut(node.label))}</text></g>'
        )
    return "".join(parts)
