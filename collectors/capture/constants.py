"""Constants pg_stat_statements turned into $n where PostgreSQL's grammar wants a literal.

`extract(year FROM d)` is shown as `extract($1 FROM d)`, `date '1995-01-01'` as `date $1`,
`interval '3' month` as `interval $3 month`, `timestamp(3) '...'` as `timestamp(3) $1`: texts
PostgreSQL's own parser refuses (pglast reads them: libpg_query accepts a $n there, for
exactly this). With values from a log the $n become literals again and the text is what
production ran (collectors/capture/params.py reads a keyword such as `year` too). Without
values, the statement is replayed as its generic plan, from a text the server parses and that
means the same with a parameter: `CAST($1 AS date)`, `CAST($3 AS interval month)`,
`pg_catalog.extract($1::text, d)` (the function EXTRACT has called since PostgreSQL 14).
"""

from __future__ import annotations

from typing import Any

from pglast import ast, parse_sql
from pglast import parser as pg_parser
from pglast.enums import CoercionForm
from pglast.visitors import Visitor

_QUALIFIERS = frozenset({"YEAR_P", "MONTH_P", "DAY_P", "HOUR_P", "MINUTE_P", "SECOND_P", "TO"})
_SECOND_PRECISION = ("ASCII_40", "ICONST", "ASCII_41")  # `second (3)`


def literal_params(sql: str) -> list[int]:
    """The $n of `sql` that stand where the grammar wants a literal (sorted)."""
    return sorted({number for number, _, _, _ in _edits(sql)})


def generic_text(sql: str) -> str:
    """`sql` with each such $n written as a parameter the server parses; `sql` itself when
    it has none (or pglast cannot read it)."""
    text = sql
    for _, start, end, replacement in sorted(_edits(sql), key=lambda e: -e[1]):
        text = text[:start] + replacement + text[end:]
    return text


def _edits(sql: str) -> list[tuple[int, int, int, str]]:
    """(n, start, end, replacement) per $n to rewrite."""
    try:
        statements = parse_sql(sql)
        tokens = pg_parser.scan(sql)
    except pg_parser.ParseError:
        return []
    params = {t.start: i for i, t in enumerate(tokens) if t.name == "PARAM"}
    found: list[tuple[int, int, int, str]] = []

    class Find(Visitor):
        def visit(self, ancestors: Any, node: ast.Node) -> None:
            if isinstance(node, ast.TypeCast):
                edit = _typed_literal(sql, tokens, params, node)
            elif isinstance(node, ast.FuncCall):
                edit = _extract_field(sql, tokens, params, node)
            else:
                return
            if edit is not None:
                found.append(edit)

    Find()(statements)
    return found


def _typed_literal(
    sql: str, tokens: list[Any], params: dict[int, int], node: ast.TypeCast
) -> tuple[int, int, int, str] | None:
    """`date $1` (the type written before the $n; `$1::date` is a cast the server parses)."""
    param, type_name = node.arg, node.typeName
    if not isinstance(param, ast.ParamRef) or type_name is None or param.location is None:
        return None
    number = int(param.number or 0)
    begin, at = type_name.location, params.get(param.location)
    if begin is None or at is None or begin < 0 or begin >= param.location:
        return None
    typed = sql[begin : param.location].strip()
    end = tokens[at].end + 1
    last = at + 1
    while last < len(tokens) and tokens[last].name in _QUALIFIERS:
        last += 1
        if tokens[last - 1].name == "SECOND_P":
            names = tuple(t.name for t in tokens[last : last + 3])
            if names == _SECOND_PRECISION:
                last += 3
    if last > at + 1:
        typed += " " + sql[tokens[at + 1].start : tokens[last - 1].end + 1]
        end = tokens[last - 1].end + 1
    return number, begin, end, f"CAST(${number} AS {typed})"


def _extract_field(
    sql: str, tokens: list[Any], params: dict[int, int], node: ast.FuncCall
) -> tuple[int, int, int, str] | None:
    """`extract($1 FROM d)`: the field as the first argument of the function."""
    names = [str(getattr(n, "sval", "")) for n in node.funcname or ()]
    if names[-1:] != ["extract"] or node.funcformat != CoercionForm.COERCE_SQL_SYNTAX:
        return None
    first = (node.args or (None,))[0]
    if not isinstance(first, ast.ParamRef) or first.location is None:
        return None
    at = params.get(first.location)
    if at is None or at < 2 or at + 1 >= len(tokens):
        return None
    opening, keyword, after = tokens[at - 1], tokens[at - 2], tokens[at + 1]
    if opening.name != "ASCII_40" or keyword.name != "EXTRACT" or after.name != "FROM":
        return None
    number = int(first.number or 0)
    return number, int(keyword.start), int(after.end) + 1, f"pg_catalog.extract(${number}::text,"
