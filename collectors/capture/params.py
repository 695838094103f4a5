"""The parameter values of captured statements, read from auto_explain logs.

An auto_explain entry shows what one execution ran with: bound parameters in `Query
Parameters` (16+, extended protocol), constants in the query text itself (simple protocol),
or before 16 the literals in a custom plan's conditions (collectors/capture/plan_values.py). Its
query key (the parse-tree fingerprint, which ignores constants) finds the pg_stat_statements
entry it belongs to; then the two texts are lexed and walked token by
token: each $n of pg_stat_statements meets a constant of the logged text (a `-` sign
included; a word for extract's field `year` or TRUE) or a bound parameter, every other token
must be the same. A text that does not
line up (pg_stat_statements 18 squashes IN lists) gives no values, rather than wrong ones.
The logs are read with the readers of `collectors.logs` (stderr, csvlog, jsonlog; gzip).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pglast import parser as pg_parser

from collectors.capture.plan_values import literal, plan_values
from collectors.logs.autoexplain import IngestOptions, check_log
from collectors.logs.formats import Position, detect_format, open_log
from collectors.logs.plans import EntryError, read_entry
from collectors.logs.prefix import TimeParser
from collectors.logs.registry import make_reader
from detector.model.identity import text_query_key

_CONSTANTS = frozenset({"ICONST", "FCONST", "SCONST"})
_NUMBERS = frozenset({"ICONST", "FCONST"})
_WORDS = frozenset({"IDENT"})
_KEY_CACHE = 20_000


@dataclass
class LoggedValues:
    """Parameter values per query key ({$n: value} per logged execution): a uniform sample of
    the executions (so frequent values come back as often as production sent them), in log
    order; and what the logs held."""

    samples: dict[str, list[dict[int, Any]]] = field(default_factory=dict)
    entries: int = 0  # auto_explain entries read
    matched: int = 0  # of a captured statement
    unaligned: int = 0  # of a captured statement, but no values could be read from them
    unbound: int = 0  # $n in the text and no `Query Parameters` (auto_explain before 16)
    from_plans: int = 0  # such executions whose custom plan showed the values
    with_null: int = 0  # a NULL parameter: not replayable from a TOML file (no null in TOML)
    problems: int = 0  # broken entries and lines (counted, skipped)


def read_logged_values(
    paths: Iterable[Path],
    statements: Mapping[str, str],
    *,
    database: str | None = None,
    log_line_prefix: str | None = None,
    limit: int = 50,
) -> LoggedValues:
    """Values for the statements (query key -> pg_stat_statements text) from the logs; at
    most `limit` samples per statement, drawn uniformly from all its logged executions
    (reservoir sampling, seeded per statement: the same logs give the same samples); entries
    of another database are skipped when the log says which database."""
    found = LoggedValues()
    keys: dict[str, str] = {}
    reservoirs: dict[str, Reservoir] = {}
    options = IngestOptions(log_line_prefix=log_line_prefix)
    for path in paths:
        check_log(path, options)
        stream, _ = open_log(path)
        with stream:
            log_format = detect_format(stream.read(1 << 16))
            reader = make_reader(
                log_format, stream, Position(), TimeParser(), log_line_prefix, 2000
            )
            for batch in reader.batches():
                found.problems += len(batch.problems)
                for entry in batch.entries:
                    if database and entry.database and entry.database != database:
                        continue
                    try:
                        logged = read_entry(entry)
                    except EntryError:
                        found.problems += 1
                        continue
                    found.entries += 1
                    text = logged.query_text
                    key = keys.get(text)
                    if key is None:
                        if len(keys) > _KEY_CACHE:
                            keys.clear()
                        key = keys[text] = text_query_key(text)
                    if key not in statements:
                        continue
                    found.matched += 1
                    bound = {int(k[1:]): v for k, v in json.loads(logged.params or "{}").items()}
                    if any(v is None for v in bound.values()):
                        found.with_null += 1
                        continue
                    if not bound and "$" in text and _has_params(text):
                        # before 16: no `Query Parameters`; a custom plan shows the values
                        bound = plan_values(text, logged.document)
                        if not bound:
                            found.unbound += 1
                            continue
                        found.from_plans += 1
                    values = aligned_values(statements[key], text, bound)
                    if values is None:
                        found.unaligned += 1
                        continue
                    if key not in reservoirs:
                        reservoirs[key] = Reservoir(limit, random.Random(f"capture:{key}"))
                    reservoirs[key].offer(values)
    found.samples = {key: reservoir.drawn() for key, reservoir in reservoirs.items()}
    return found


class Reservoir:
    """k of the items offered, each equally likely to be kept (Vitter's algorithm R)."""

    def __init__(self, k: int, rng: random.Random) -> None:
        self.k, self.rng, self.seen = k, rng, 0
        self.kept: list[tuple[int, dict[int, Any]]] = []

    def offer(self, item: dict[int, Any]) -> None:
        self.seen += 1
        if len(self.kept) < self.k:
            self.kept.append((self.seen, item))
            return
        slot = self.rng.randrange(self.seen)
        if slot < self.k:
            self.kept[slot] = (self.seen, item)

    def drawn(self) -> list[dict[int, Any]]:
        """The kept items in the order they were offered."""
        return [item for _, item in sorted(self.kept, key=lambda pair: pair[0])]


def aligned_values(
    normalized: str, logged: str, bound: Mapping[int, str | None]
) -> dict[int, Any] | None:
    """{n: value} for each $n of the pg_stat_statements text, from the logged text of one
    execution and its bound parameters; None when the texts do not line up."""
    try:
        ours, theirs = pg_parser.scan(normalized), pg_parser.scan(logged)
    except pg_parser.ParseError:
        return None
    while theirs and theirs[-1].name == "ASCII_59":  # the logged text keeps its `;`
        theirs = theirs[:-1]
    values: dict[int, Any] = {}
    at = 0
    for token in ours:
        if at >= len(theirs):
            return None
        other = theirs[at]
        if token.name != "PARAM":
            mine = normalized[token.start : token.end + 1]
            if token.name != other.name or mine.lower() != _text(logged, other).lower():
                return None
            at += 1
            continue
        value: Any = None
        if other.name == "PARAM":
            value, at = bound.get(int(_text(logged, other)[1:])), at + 1
        elif other.name in _CONSTANTS:
            value, at = literal(_text(logged, other), other.name), at + 1
        elif other.name == "ASCII_45" and at + 1 < len(theirs) and theirs[at + 1].name in _NUMBERS:
            value = literal("-" + _text(logged, theirs[at + 1]), theirs[at + 1].name)
            at += 2
        elif other.name in _WORDS or other.kind != "NO_KEYWORD":
            # a constant written as a word: extract's field (`year`), TRUE and FALSE; as a
            # string it means the same there (`extract('year' FROM ...)`)
            value = None if other.name == "NULL_P" else _text(logged, other)
            at += 1
        if value is None:
            return None
        number = int(normalized[token.start + 1 : token.end + 1])
        if values.setdefault(number, value) != value:
            return None
    return values if at == len(theirs) else None


def _has_params(sql: str) -> bool:
    try:
        return any(t.name == "PARAM" for t in pg_parser.scan(sql))
    except pg_parser.ParseError:
        return False


def _text(sql: str, token: Any) -> str:
    return sql[token.start : token.end + 1]
