"""The one style of every table planshift prints on a terminal (listings, census, compare's plan
census, setup-check, timeline --top): a bold header underlined, no vertical rules, numbers
right-aligned, and every cell printed as the text it is, on one line, without control characters
(names from workloads and logs are never read as markup)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich import box
from rich.table import Table
from rich.text import Text

from detector.reports.escape import single_line

STYLE = box.SIMPLE_HEAD


def table(
    header: Sequence[str],
    rows: Iterable[Sequence[object]] = (),
    *,
    numeric: Iterable[int] = (),
    title: str | None = None,
    indent: bool = False,
) -> Table:
    """A table of `rows` (cells of any type, shown as text; None as `-`); `numeric` columns are
    right-aligned; `indent` sets it two spaces in (under a heading line)."""
    right = set(numeric)
    made = Table(
        title=Text(single_line(title), style="bold") if title else None,
        title_justify="left",
        box=STYLE,
        header_style="bold",
        pad_edge=indent,
        padding=(0, 1),
        collapse_padding=True,
        show_edge=False,
    )
    for index, name in enumerate(header):
        made.add_column(Text(single_line(name)), justify="right" if index in right else "left")
    for row in rows:
        made.add_row(*(cell if isinstance(cell, Text) else Text(_text(cell)) for cell in row))
    return made


def _text(value: object) -> str:
    """A cell: visible text on one line (names come from workloads and logs); None is `-`."""
    return "-" if value is None else single_line(str(value))
