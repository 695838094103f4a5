"""Parameter values from the literals of custom plans, when the log has no `Query Parameters`.

PostgreSQL before 16 logs a prepared statement's text with its $n and without the values it
ran with. But a custom plan (the first executions of a prepared statement, or whenever the
plan cache prefers one) is planned with the values substituted: its conditions show them,
`Index Cond: (aid = 4711)` for `WHERE aid = $1`. Each `column op $n` of the text (a BETWEEN
as `>=` and `<=`, a cast around $n allowed) is looked up in the plan's conditions as
`column op literal`; the values count only when every $n is found, with one literal each. A
generic plan shows `$1` there, so it gives nothing, rightly.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from pglast import ast, parse_sql
from pglast import parser as pg_parser
from pglast.enums import A_Expr_Kind

CONDITIONS = ("Index Cond", "Recheck Cond", "Filter", "Join Filter", "Hash Cond", "Merge Cond")
OPERATORS = ("=", "<>", "<", ">", "<=", ">=")
_LITERAL = r"('(?:[^']|'')*'|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"


def plan_literals(sql: str, document: Mapping[str, Any]) -> dict[int, str]:
    """{n: literal as the plan shows it} for every $n of `sql`, or {} when one is missing."""
    comparisons = _comparisons(sql)
    numbers = {n for _, _, n in comparisons}
    if not comparisons or numbers != set(_param_numbers(sql)):
        return {}
    text = " ".join(_conditions(document.get("Plan")))
    found: dict[int, set[str]] = {}
    for column, operator, number in comparisons:
        pattern = rf"(?<![\w.])(?:\w+\.)?{re.escape(column)} {re.escape(operator)} {_LITERAL}"
        for match in re.finditer(pattern, text):
            found.setdefault(number, set()).add(match.group(1))
    if set(found) != numbers or any(len(values) != 1 for values in found.values()):
        return {}
    return {number: next(iter(values)) for number, values in found.items()}


def plan_values(sql: str, document: Mapping[str, Any]) -> dict[int, Any]:
    """`plan_literals` read as values (what `Query Parameters` would have given: text)."""
    values: dict[int, Any] = {}
    for number, text in plan_literals(sql, document).items():
        kind = "SCONST" if text.startswith("'") else "FCONST" if "." in text else "ICONST"
        value = literal(text, kind)
        if value is None:
            return {}
        values[number] = str(value)
    return values


def _param_numbers(sql: str) -> list[int]:
    try:
        tokens = pg_parser.scan(sql)
    except pg_parser.ParseError:
        return []
    return [int(sql[t.start + 1 : t.end + 1]) for t in tokens if t.name == "PARAM"]


def _comparisons(sql: str) -> list[tuple[str, str, int]]:
    """(column, operator, n) of each `column op $n` (or `$n op column`, BETWEEN) in `sql`."""
    try:
        statements = parse_sql(sql)
    except pg_parser.ParseError:
        return []
    found: list[tuple[str, str, int]] = []
    for statement in statements:
        for node in _nodes(statement.stmt):
            if not isinstance(node, ast.A_Expr) or not node.name:
                continue
            operator = str(node.name[-1].sval)
            column, other = _column(node.lexpr), node.rexpr
            if node.kind == A_Expr_Kind.AEXPR_BETWEEN and column and isinstance(other, tuple):
                low, high = (_param(item) for item in other)
                if low and high:
                    found += [(column, ">=", low), (column, "<=", high)]
            elif node.kind == A_Expr_Kind.AEXPR_OP and operator in OPERATORS:
                if column and (number := _param(other)):
                    found.append((column, operator, number))
                elif (column := _column(other)) and (number := _param(node.lexpr)):
                    flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(operator, operator)
                    found.append((column, flipped, number))
    return found


def _column(node: Any) -> str | None:
    if isinstance(node, ast.ColumnRef) and node.fields:
        last = node.fields[-1]
        return str(last.sval) if isinstance(last, ast.String) else None
    return None


def _param(node: Any) -> int | None:
    while isinstance(node, ast.TypeCast):
        node = node.arg
    return int(node.number) if isinstance(node, ast.ParamRef) and node.number else None


def _nodes(node: Any) -> Iterator[Any]:
    """Every AST node below `node` (depth first)."""
    if isinstance(node, ast.Node):
        yield node
        for name in node:
            yield from _nodes(getattr(node, name))
    elif isinstance(node, tuple):
        for item in node:
            yield from _nodes(item)


def _conditions(node: Any) -> Iterator[str]:
    if not isinstance(node, Mapping):
        return
    for key in CONDITIONS:
        if isinstance(node.get(key), str):
            yield node[key]
    for child in node.get("Plans") or ():
        yield from _conditions(child)


def literal(text: str, kind: str) -> Any:
    """The value of a constant as TOML can hold it: an integer, a float that reads back the
    same, else text; None for what cannot be read back (E'' escapes, bit strings)."""
    if kind == "ICONST":
        digits = text.replace("_", "")
        try:
            return int(digits) if digits.lstrip("-").isdigit() else int(digits, 0)
        except ValueError:
            return None
    if kind == "FCONST":
        try:
            number = float(text)
        except ValueError:
            return None
        return number if repr(number) == text else text
    if text.startswith("'") and text.endswith("'") and len(text) >= 2:
        return text[1:-1].replace("''", "'")
    if text.startswith("$"):  # dollar quoting: $tag$ ... $tag$
        tag = text[: text.index("$", 1) + 1]
        return text[len(tag) : -len(tag)]
    return None
