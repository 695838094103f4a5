"""Progress of long jobs: a bar on a terminal, plain lines in CI logs; one callback shape."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from detector.reports.escape import single_line

Advance = Callable[[str, int], None]  # (what is being done, steps done since the last call)


@contextmanager
def progress_bar(
    console: Console | None, total: int | None, *, label: str = "starting", in_bytes: bool = False
) -> Iterator[Advance]:
    """A rich progress bar on a terminal; plain lines (every ~10% or 15 s) otherwise, for CI logs.

    `advance(description, steps)`; a call with 0 steps names a step that moves no bar (setting
    up a server); no console: silent. `in_bytes`: steps are bytes read (total None: unknown, as for gzip)."""
    if console is None:  # nobody to tell
        yield lambda description, steps: None
        return
    if not console.is_terminal:
        yield PlainProgress(console, total, in_bytes)
        return
    counter = (DownloadColumn(), TransferSpeedColumn()) if in_bytes else (MofNCompleteColumn(),)
    columns = (
        TextColumn("{task.description:<28}", markup=False),
        BarColumn(),
        *counter,
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(single_line(label), total=total)

        def advance(description: str, steps: int) -> None:
            progress.update(task, advance=steps, description=single_line(description))

        yield advance


class PlainProgress:
    """`query 120/800 (15%), 0:42 elapsed` lines: something in a CI log during a long run."""

    def __init__(
        self, console: Console, total: int | None, in_bytes: bool = False, every_s: float = 15.0
    ) -> None:
        self.console = console
        self.known = total is not None
        self.total = max(total or 0, 1)
        self.in_bytes = in_bytes
        self.every_s = every_s
        self.done = 0
        self.started = self.last = time.monotonic()
        self.next_mark = self.total / 10

    def __call__(self, description: str, steps: int) -> None:
        now = time.monotonic()
        if steps == 0:
            self._print(f"{description}, {self._elapsed(now)} elapsed")
            return
        self.done += steps
        if (
            self.done >= self.next_mark
            or now - self.last >= self.every_s
            or self.done >= self.total
        ):
            while self.next_mark <= self.done:
                self.next_mark += self.total / 10
            self._print(f"{description} {self._count()}, {self._elapsed(now)} elapsed")

    def _count(self) -> str:
        done = f"{self.done / 2**20:.1f} MB" if self.in_bytes else str(self.done)
        if not self.known:
            return done
        total = f"{self.total / 2**20:.1f} MB" if self.in_bytes else str(self.total)
        return f"{done}/{total} ({self.done / self.total:.0%})"

    def _elapsed(self, now: float) -> str:
        seconds = int(now - self.started)
        return f"{seconds // 60}:{seconds % 60:02d}"

    def _print(self, text: str) -> None:
        self.last = time.monotonic()
        self.console.print(single_line(text), markup=False, highlight=False)
