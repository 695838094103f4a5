"""Query identity: THE query key of every source, computed here and nowhere else.

- A workload query is its name (`workload_query_key`): two queries that differ only in constants
  are still two queries, and a sweep point is a column of its own.
- A statement seen as text (logs, pg_stat_statements) is PostgreSQL's own parse-tree fingerprint
  (pglast, the algorithm of pg_query), which ignores constants, so `... = 42` in a log and
  `... = $1` in pg_stat_statements are one query (`text_query_key`). Text the parser rejects
  falls back to a hash of its constant-masked form.
"""

from __future__ import annotations

import hashlib

from pglast import parser as pg_parser

_CONSTANTS = frozenset({"ICONST", "FCONST", "SCONST", "BCONST", "XCONST", "USCONST"})


def workload_query_key(name: str) -> str:
    return hashlib.sha256(f"workload-query:{name}".encode()).hexdigest()[:16]


def text_query_key(text: str, normalized: str | None = None) -> str:
    """`normalized`: `normalize(text)[0]` when the caller has it already."""
    try:
        return str(pg_parser.fingerprint(text))
    except pg_parser.ParseError:
        masked = normalize(text)[0] if normalized is None else normalized
        return "text:" + hashlib.sha256(masked.encode()).hexdigest()[:16]


def normalize(sql: str) -> tuple[str, tuple[str, ...]]:
    """SQL with each constant replaced by $n (numbered after existing params), and the constants
    (pglast's token offsets count characters, not bytes)."""
    try:
        tokens = pg_parser.scan(sql)
    except pg_parser.ParseError:
        return sql, ()
    constants = [t for t in tokens if t.name in _CONSTANTS]
    if not constants:
        return sql, ()
    base = max(
        (int(sql[t.start + 1 : t.end + 1] or 0) for t in tokens if t.name == "PARAM"), default=0
    )
    pieces: list[str] = []
    literals: list[str] = []
    position = 0
    for number, token in enumerate(constants, start=base + 1):
        pieces.append(sql[position : token.start])
        pieces.append(f"${number}")
        literals.append(sql[token.start : token.end + 1])
        position = token.end + 1
    pieces.append(sql[position:])
    return "".join(pieces), tuple(literals)
