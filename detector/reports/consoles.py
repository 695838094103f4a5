"""Every rich console planshift prints through is made here (the CLI's stdout and stderr, a
report rendered to text, output thrown away), so all of them agree: no highlighting (names
from workloads and logs would be coloured at random), no wrapping at 80 columns and no cells
cut with `...` when the output is piped, and plain text without colours when rendered to a file.
"""

from __future__ import annotations

import os
from typing import TextIO

from rich.console import Console

PIPED_WIDTH = 10_000  # "no width" for a pipe or a file: each line as long as it is
TEXT_WIDTH = 160  # a report rendered to a text file (--output report.txt)


def make_console(
    *, stderr: bool = False, markup: bool = True, file: TextIO | None = None, quiet: bool = False
) -> Console:
    """A console on stdout (or stderr), or rendering into `file` as plain text."""
    if file is not None:
        return Console(
            file=file, width=TEXT_WIDTH, color_system=None, highlight=False, markup=markup,
            soft_wrap=False, quiet=quiet,
        )  # fmt: skip
    made = Console(stderr=stderr, highlight=False, soft_wrap=False, markup=markup, quiet=quiet)
    if not made.is_terminal and "COLUMNS" not in os.environ:
        made.width = PIPED_WIDTH
    return made


def discard() -> Console:
    """A console whose output goes nowhere (a report printed as JSON instead, a script)."""
    return make_console(quiet=True)
