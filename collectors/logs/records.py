"""The log formats planshift reads, by name: which one a file is written in, and its reader.

Each format is a module that owns where its entries are cut and how its fields are read
(`collectors.logs.formats.LogFormat`): `stderr` (any `log_line_prefix`), `csvlog`, `jsonlog`.
Detection looks at a file's first non-empty line and asks the formats in order; stderr, the
format of last resort, takes what no other format recognizes.
"""

from __future__ import annotations

from typing import BinaryIO

from collectors.logs.csvlog import CsvlogFormat
from collectors.logs.formats import BOM, LogFormat, LogReader, Position
from collectors.logs.jsonlog import JsonlogFormat
from collectors.logs.prefix import TimeParser
from collectors.logs.stderr import StderrFormat
from detector.errors import PlanshiftError

FORMATS = ("stderr", "csvlog", "jsonlog")
DETECTION_ORDER = ("jsonlog", "csvlog", "stderr")


def format_of(name: str, log_line_prefix: str | None = None) -> LogFormat:
    """The format of that name (stderr reads `log_line_prefix`, or guesses it when None)."""
    if name == "stderr":
        return StderrFormat(log_line_prefix)
    if name == "csvlog":
        return CsvlogFormat()
    if name == "jsonlog":
        return JsonlogFormat()
    raise PlanshiftError(f"unknown log format {name!r}", f"use one of {', '.join(FORMATS)}")


def detect_format(head: bytes) -> str:
    """The name of the format of a log whose uncompressed bytes start with `head`."""
    text = head.removeprefix(BOM).lstrip()
    first = text.split(b"\n", 1)[0]
    for name in DETECTION_ORDER:
        if format_of(name).recognizes(first):
            return name
    return "stderr"


def make_reader(
    name: str,
    stream: BinaryIO,
    position: Position,
    times: TimeParser,
    log_line_prefix: str | None,
    batch_size: int,
) -> LogReader:
    """The reader of a log format (stderr needs the server's log_line_prefix, or None)."""
    return format_of(name, log_line_prefix).reader(stream, position, times, batch_size)
