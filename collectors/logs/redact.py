"""Literals kept out of the store: statements that set a password (always), and every constant
under `--anonymize` (like pgBadger's): SQL text normalized, plan conditions without values.

A statement sets a password when pglast parses it into a role statement (CREATE/ALTER ROLE or
USER) or a user mapping / foreign server with a `password` option, or into a DO block that
mentions one; a string constant holding a conninfo `password=` (dblink, CREATE SUBSCRIPTION)
counts too. Text that does not parse is treated as setting one when it mentions a password
at all. Its constants after PASSWORD (and the constants that carry one) become `<redacted>`;
when the lexer cannot cut the text either, everything after the word is dropped.

Anonymizing keeps what fingerprints and query keys are made of (node types, relations,
indexes, the statement's structure): only constants change, so fingerprints are the same.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pglast import ast, parse_sql
from pglast import parser as pg_parser

REDACTED = "<redacted>"
_MENTION = re.compile(r"(?i)\bpassword\b")
_CONNINFO_PASSWORD = re.compile(r"(?i)\bpassword\s*=")
_AFTER_MENTION = re.compile(r"(?is)(\bpassword\b).*")
_STRINGS = frozenset({"SCONST", "USCONST", "BCONST", "XCONST"})
_NUMBERS = frozenset({"ICONST", "FCONST"})
_AFTER_PASSWORD = _NUMBERS | {"PARAM", "NULL_P", "IDENT"}  # what a PASSWORD keyword may precede
_QUOTED = re.compile(r"(?:[EeBbXxNn]|[Uu]&)?'(?:[^']|'')*'?|\$([A-Za-z_]\w*)?\$.*?\$\1\$", re.S)
_NUMBER = re.compile(r"(?<![\w$.])\d+(?:\.\d*)?(?:[eE][+-]?\d+)?")
_OPTION_STATEMENTS = (
    ast.CreateRoleStmt,
    ast.AlterRoleStmt,
    ast.CreateUserMappingStmt,
    ast.AlterUserMappingStmt,
    ast.CreateForeignServerStmt,
    ast.AlterForeignServerStmt,
)
# plan node keys whose string values are names or enumerations, never expressions
_NAMES = frozenset({
    "Node Type", "Strategy", "Partial Mode", "Join Type", "Parent Relationship",
    "Scan Direction", "Relation Name", "Schema", "Alias", "Index Name", "CTE Name",
    "Subplan Name", "Function Name", "Operation", "Sort Method", "Sort Space Type",
    "Command", "Parallel Aware", "Async Capable", "Inner Unique", "Single Copy",
})  # fmt: skip


def sets_password(sql: str) -> bool:
    """Whether `sql` (one statement or several) sets a password, or may."""
    if not _MENTION.search(sql):
        return False
    try:
        statements = parse_sql(sql)
    except pg_parser.ParseError:
        return True
    for raw in statements or ():
        statement = raw.stmt
        if isinstance(statement, ast.DoStmt):
            return True
        if isinstance(statement, _OPTION_STATEMENTS) and any(
            isinstance(option, ast.DefElem) and (option.defname or "").lower() == "password"
            for option in _options(statement)
        ):
            return True
    return any(_CONNINFO_PASSWORD.search(value) for value in _string_constants(sql))


def _options(statement: Any) -> tuple[Any, ...]:
    return tuple(getattr(statement, "options", None) or ())


def _string_constants(sql: str) -> list[str]:
    try:
        tokens = pg_parser.scan(sql)
    except pg_parser.ParseError:
        return []
    raw = sql.encode()
    return [raw[t.start : t.end + 1].decode(errors="replace") for t in tokens if t.name in _STRINGS]


def redact_passwords(sql: str) -> str:
    """`sql` with the password it sets replaced by <redacted>; unchanged when it sets none."""
    if not sets_password(sql):
        return sql
    try:
        tokens = pg_parser.scan(sql)
    except pg_parser.ParseError:
        tokens = []
    pieces: list[str] = []
    position = 0
    after_password = False
    for token in tokens:
        if token.name in _STRINGS:
            secret = after_password or bool(_MENTION.search(sql[token.start : token.end + 1]))
        else:
            secret = after_password and token.name in _AFTER_PASSWORD
        if secret:
            pieces += [sql[position : token.start], REDACTED]
            position = token.end + 1
        after_password = token.name == "PASSWORD"
    if not pieces:
        return _AFTER_MENTION.sub(rf"\1 {REDACTED}", sql)
    pieces.append(sql[position:])
    return "".join(pieces)


def redact_message(text: str) -> str:
    """A free-text message (a log sample) cut after the word password, if it has one."""
    return _AFTER_MENTION.sub(rf"\1 {REDACTED}", text) if _MENTION.search(text) else text


def anonymize_sql(sql: str) -> str:
    """`sql` with every constant replaced by $n (the lexer), or by ? when it cannot lex."""
    from detector.model.identity import normalize

    normalized, literals = normalize(sql)
    if literals or _lexes(sql):
        return redact_passwords(normalized)
    return _mask(sql, "?")


def anonymize_expression(text: str) -> str:
    """A plan condition with its constants masked: `'Zürich'::text` -> `'?'::text`, 42 -> ?."""
    try:
        tokens = pg_parser.scan(text)
    except pg_parser.ParseError:
        return _mask(text, "'?'")
    pieces: list[str] = []
    position = 0
    for token in tokens:
        if token.name in _STRINGS or token.name in _NUMBERS:
            pieces += [text[position : token.start], "'?'" if token.name in _STRINGS else "?"]
            position = token.end + 1
    pieces.append(text[position:])
    return "".join(pieces)


def _lexes(sql: str) -> bool:
    try:
        pg_parser.scan(sql)
    except pg_parser.ParseError:
        return False
    return True


def _mask(text: str, string_mask: str) -> str:
    return _NUMBER.sub("?", _QUOTED.sub(string_mask, text))


def anonymize_plan(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of an auto_explain/EXPLAIN JSON document without constants or parameters."""
    result: dict[str, Any] = {}
    for key, value in document.items():
        if key == "Query Parameters":
            continue
        if key == "Query Text" and isinstance(value, str):
            result[key] = anonymize_sql(value)
        elif key == "Plan" and isinstance(value, dict):
            result[key] = _anonymize_node(value)
        else:
            result[key] = value
    return result


def _anonymize_node(node: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in node.items():
        if key == "Plans" and isinstance(value, list):
            result[key] = [_anonymize_node(c) if isinstance(c, dict) else c for c in value]
        elif key in _NAMES:
            result[key] = value
        else:
            result[key] = _anonymize_value(value)
    return result


def _anonymize_value(value: Any) -> Any:
    if isinstance(value, str):
        return anonymize_expression(value)
    if isinstance(value, list):
        return [_anonymize_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _anonymize_value(item) for key, item in value.items()}
    return value


def _no_mention(text: str) -> bool:
    """Surely no `password` (fast: an ASCII text, where IGNORECASE is lower())."""
    return text.isascii() and "password" not in text.lower()


def scrub_plan_json(text: str, *, anonymize: bool) -> str:
    """Plan JSON text as it may be stored: anonymized, or with a password-setting Query Text
    redacted (the text unchanged when there is nothing to remove)."""
    if not anonymize and (_no_mention(text) or not _MENTION.search(text)):
        return text
    try:
        document = json.loads(text)
    except ValueError:
        return _mask(text, "'?'") if anonymize else _AFTER_MENTION.sub(rf"\1 {REDACTED}", text)
    if not isinstance(document, dict):
        return text
    if anonymize:
        return json.dumps(anonymize_plan(document), indent=2, ensure_ascii=False)
    query = document.get("Query Text")
    if isinstance(query, str) and sets_password(query):
        document["Query Text"] = redact_passwords(query)
        return json.dumps(document, indent=2, ensure_ascii=False)
    return text
