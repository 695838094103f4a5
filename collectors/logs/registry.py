"""The log formats planshift reads, by name: which one a file is written in, and its reader.

Each format is a module that owns where its entries are cut and how its fields are read
(`collectors.logs.formats.LogFormat`):

| name | module | what |
|---|---|---|
| stderr | stderr.py | log_destination = stderr, any `log_line_prefix` (given, or guessed) |
| csvlog | csvlog.py | log_destination = csvlog |
| jsonlog | jsonlog.py | log_destination = jsonlog (15+) |
| rds | rds.py | Amazon RDS / Aurora: stderr with their fixed prefix `%t:%r:%u@%d:[%p]:` |
| cnpg | envelopes.py | CloudNativePG: JSON lines with the csvlog record under `record` |
| cloudsql | envelopes.py | Google Cloud SQL: Cloud Logging entries (`textPayload`, `jsonPayload`) |
| syslog | syslog.py | log_destination = syslog, as rsyslog writes it (`[seq-chunk]` records) |

Detection looks at a file's first non-empty line and asks the formats in order (envelopes
before plain jsonlog, syslog and RDS before stderr). A file that starts inside an entry (cut
with `tail -c`, or a piece of a rotated log) has a first line no format starts an entry with:
then the first of its next lines that starts an entry in some format decides (stderr's last).
stderr, the format of last resort, takes what no other format recognizes.
"""

from __future__ import annotations

from typing import BinaryIO

from collectors.logs.csvlog import CsvlogFormat
from collectors.logs.envelopes import CloudSqlFormat, CnpgFormat
from collectors.logs.formats import BOM, LogFormat, LogReader, Position
from collectors.logs.jsonlog import JsonlogFormat
from collectors.logs.prefix import TimeParser
from collectors.logs.rds import RdsFormat
from collectors.logs.stderr import StderrFormat
from collectors.logs.syslog import SyslogFormat
from detector.errors import PlanshiftError

FORMATS = ("stderr", "csvlog", "jsonlog", "rds", "cnpg", "cloudsql", "syslog")
DETECTION_ORDER = ("cnpg", "cloudsql", "jsonlog", "csvlog", "syslog", "rds", "stderr")
DETECTION_LINES = 2000  # of the head: where an entry must have started


def format_of(name: str, log_line_prefix: str | None = None) -> LogFormat:
    """The format of that name (stderr reads `log_line_prefix`, or guesses it when None)."""
    if name == "stderr":
        return StderrFormat(log_line_prefix)
    if name == "csvlog":
        return CsvlogFormat()
    if name == "jsonlog":
        return JsonlogFormat()
    if name == "rds":
        return RdsFormat(log_line_prefix)
    if name == "cnpg":
        return CnpgFormat()
    if name == "cloudsql":
        return CloudSqlFormat()
    if name == "syslog":
        return SyslogFormat(log_line_prefix)
    raise PlanshiftError(f"unknown log format {name!r}", f"use one of {', '.join(FORMATS)}")


def detect_format(head: bytes) -> str:
    """The name of the format of a log whose uncompressed bytes start with `head`."""
    lines = [line for line in head.removeprefix(BOM).split(b"\n", DETECTION_LINES) if line.strip()]
    formats = [(name, format_of(name)) for name in DETECTION_ORDER]
    if lines and any(f.recognizes(lines[0]) for name, f in formats if name != "stderr"):
        return next(name for name, f in formats if f.recognizes(lines[0]))
    for line in lines[1:DETECTION_LINES]:  # a partial first entry: where the next one starts
        for name, log_format in formats:
            if log_format.starts_entry(line):
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
