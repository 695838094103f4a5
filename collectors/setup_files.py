"""Setup SQL files read statement by statement, COPY data in blocks: memory flat in the file size.

A statement ends at a `;` token of PostgreSQL's own lexer (pglast's scanner), so a `;` inside a
string, a dollar-quoted function body or a comment does not end it. `COPY ... FROM stdin` is
followed by its rows up to a line `\\.` (pg_dump's plain format): they are handed on in blocks
of whole lines, never parsed. pg_dump's psql meta-commands `\\restrict KEY` and `\\unrestrict
KEY` (15.14+) are skipped; any other meta-command is an error (it needs psql).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, BinaryIO

from pglast import parser as pg_parser

from detector.errors import PlanshiftError

BLOCK = 1 << 20  # COPY data handed on per write
SKIPPED_META = ("\\restrict ", "\\unrestrict ")
_COMMENTS = frozenset({"SQL_COMMENT", "C_COMMENT"})
_END = "ASCII_59"  # ;


@dataclass(frozen=True)
class SetupStatement:
    sql: str
    line: int  # where it starts in its file (1-based)
    copy_rows: Iterator[bytes] | None = None  # COPY FROM stdin: its data, in blocks of lines


class SetupFile:
    """The statements of one SQL file, in order; `bytes_read` and `rows` move as it is read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = path.stat().st_size
        self.bytes_read = 0
        self.rows = 0  # COPY rows read so far

    def __iter__(self) -> Iterator[SetupStatement]:
        with self.path.open("rb") as stream:
            yield from self._statements(stream)

    def fail(self, line: int, problem: str) -> PlanshiftError:
        return PlanshiftError(
            f"{self.path.name}:{line}: {problem}", "setup files are SQL as pg_dump writes it"
        )

    def _statements(self, stream: BinaryIO) -> Iterator[SetupStatement]:
        pending: list[str] = []
        start = number = 0
        for raw in iter(stream.readline, b""):
            number += 1
            self.bytes_read = stream.tell()
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise self.fail(number, f"not UTF-8 ({exc.reason})") from None
            if not pending:
                if line.startswith("\\"):
                    if not line.startswith(SKIPPED_META):
                        raise self.fail(number, f"psql meta-command {line.split()[0]}")
                    continue
                if not line.strip() or line.lstrip().startswith("--"):
                    continue
                start = number
            pending.append(line)
            if not line.rstrip().endswith(";"):
                continue
            text = "".join(pending)
            try:
                tokens = pg_parser.scan(text)
            except pg_parser.ParseError:
                continue  # the `;` is inside a string, a body or a comment that goes on
            significant = [t for t in tokens if t.name not in _COMMENTS]
            if not significant or significant[-1].name != _END:
                continue
            pending = []
            statements = _split(text, significant)
            for index, (sql, copy) in enumerate(statements):
                if not copy:
                    yield SetupStatement(sql, start)
                    continue
                if index != len(statements) - 1:
                    raise self.fail(start, "COPY FROM stdin must end its line")
                rows = self._copy_rows(stream, number)
                yield SetupStatement(sql, start, rows)
                for _ in rows:  # the consumer did not read the data: skip it
                    pass
                number = self._line_after_copy
        tail = "".join(pending).strip()
        if tail and not _only_comments(tail):
            yield SetupStatement(tail, start)

    _line_after_copy = 0

    def _copy_rows(self, stream: BinaryIO, line: int) -> Iterator[bytes]:
        """The data lines after a COPY FROM stdin, in blocks of whole lines, up to `\\.`."""
        self._line_after_copy = line
        while True:
            offset = stream.tell()
            block = stream.read(BLOCK)
            while block and b"\n" not in block:  # a row longer than a block
                more = stream.read(BLOCK)
                if not more:
                    break
                block += more
            end = _end_marker(block)
            if end < 0:
                if not block:
                    raise self.fail(line, "COPY data without its end marker (a line \\.)")
                last = block.rfind(b"\n") + 1 or len(block)
                stream.seek(offset + last)
                self._account(block[:last], stream)
                yield block[:last]
                continue
            marker = block.find(b"\n", end)
            stream.seek(offset + (marker + 1 if marker >= 0 else len(block)))
            if end:
                self._account(block[:end], stream)
                yield block[:end]
            self._line_after_copy += 1
            self.bytes_read = stream.tell()
            return

    def _account(self, rows: bytes, stream: BinaryIO) -> None:
        lines = rows.count(b"\n")
        self.rows += lines
        self._line_after_copy += lines
        self.bytes_read = stream.tell()


def _end_marker(block: bytes) -> int:
    """Where the line `\\.` starts in a block of whole lines, or -1 (in COPY's text format
    a line starting with a backslash and a dot is the end marker and nothing else)."""
    if block.startswith(b"\\."):
        return 0
    found = block.find(b"\n\\.")
    return found + 1 if found >= 0 else -1


def _split(text: str, tokens: list[Any]) -> list[tuple[str, bool]]:
    """(statement, is COPY FROM stdin) for each `;`-terminated statement of `text`; `tokens`:
    its tokens without comments, so a statement starts at its first word."""
    found: list[tuple[str, bool]] = []
    words: list[Any] = []
    for token in tokens:
        if token.name != _END:
            words.append(token)
            continue
        if words:
            sql = text[words[0].start : token.start].strip()
            names = [word.name for word in words]
            found.append((sql, names[0] == "COPY" and _from_stdin(names)))
        words = []
    return found


def _from_stdin(words: list[str]) -> bool:
    return any(a == "FROM" and b == "STDIN" for a, b in pairwise(words))


def _only_comments(text: str) -> bool:
    try:
        return all(t.name in _COMMENTS for t in pg_parser.scan(text))
    except pg_parser.ParseError:
        return False  # the server says what is wrong with it
