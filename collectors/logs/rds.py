"""Amazon RDS and Aurora PostgreSQL logs: stderr with a fixed `log_line_prefix`.

RDS sets `log_line_prefix = '%t:%r:%u@%d:[%p]:'` and does not let it be changed, so its log
files (downloaded from the console, `aws rds download-db-log-file-portion`, or CloudWatch
exports of them) read as stderr with that prefix: entries are cut as `stderr` cuts them, and
the prefix gives the time, client, user, database and pid, which guessing would miss (the user
and database follow the client address without a space:
`2026-11-24 14:33:15 UTC:10.0.0.7(51234):app@shop:[4242]:LOG:  duration: ...`).
A file is recognized as RDS when its first line reads with that prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO

from collectors.logs.formats import LogReader, Position
from collectors.logs.prefix import PrefixParser, TimeParser
from collectors.logs.stderr import StderrFormat, StderrReader

RDS_PREFIX = "%t:%r:%u@%d:[%p]:"
_PARSER = PrefixParser(RDS_PREFIX)


@dataclass(frozen=True)
class RdsFormat(StderrFormat):
    """stderr with the RDS prefix, unless `prefix` (--log-line-prefix) says otherwise."""

    name: str = "rds"

    def recognizes(self, first_line: bytes) -> bool:
        return _PARSER.parse(first_line.decode("utf-8", "replace")) is not None

    def parser(self) -> PrefixParser:
        return PrefixParser(self.prefix or RDS_PREFIX)

    def reader(
        self, stream: BinaryIO, position: Position, times: TimeParser, batch_size: int
    ) -> LogReader:
        return StderrReader(stream, position, times, self.parser(), batch_size)
