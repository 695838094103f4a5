"""Query identity per statement template: texts that differ only in their constants share one
libpg_query fingerprint and one normalized SQL, so both are computed once per template.

A log of the simple protocol holds a new text for nearly every execution (`... WHERE id = 42`,
then `= 43`), and lexing plus fingerprinting each costs ~100 us. `template_of(text)` cuts a
text with one regex into its context and its plain constants: integers of at most 9 digits
(always ICONST), decimals `1.5` (FCONST) and strings `'...'` without quote, backslash or NUL
(SCONST), each with a neighbour that cannot join it into another token (no identifier
character, `.`, `$`, `&` or quote beside it). Texts with comments, dollar quotes, backslashes or
non-ASCII characters have no template. The key is the context with a mark of each constant's
kind, so two texts with one key are the same text but for the contents of those constants.

Why that gives the same identity: the first text of a template is identified the full way
(`QueryKeys`) and the template is kept only when (a) PostgreSQL's lexer (pglast.scan) finds
exactly those constants, of those kinds, and (b) the parse tree holds each of them as an
A_Const node at its place (no value used elsewhere: `float(10)`, `CURRENT_TIME(3)` are not).
A second text with the key then lexes to the same tokens with other constant values (the
context is identical and a constant's content cannot end it early or join a neighbour), parses
the same way (the grammar chooses by token kinds), and differs only in A_Const values, which the
fingerprint ignores; its normalized SQL is the template's, its literals are its own constants.
The second text of each template is also computed the full way and compared (a check in
production, not only in tests): a template that disagrees is dropped for good. (a) and (b) are
proven for the first text when the second arrives: most templates of a log never get a
second text, and proving costs more than identifying.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from pglast import parser as pg_parser

_PIECES = re.compile(  # the lookahead of first characters lets the scan skip ahead (3x)
    r"""(?=[\d'"\\$/\-\x00])(?:(?P<f>\d(?<![\w$.'"&]\d)\d{0,8}\.\d{1,9}(?![\w.$'"]))"""
    r"""|(?P<i>\d(?<![\w$.'"&]\d)\d{0,8}(?![\w.$'"]))"""
    r"""|(?P<s>'(?<![\w$'"&]')[^'\\\x00]*'(?![\w$'"]))"""
    r"""|(?P<q>"[^"]*")"""  # a quoted identifier: context (digits in it are no constants)
    r"""|(?P<x>-(?=-)|/(?=\*)|\$(?!\d)|[\\\x00'"]))""",  # no template: comments, dollar
)  # quotes, backslashes, quotes that open no plain string
_KINDS = {"i": "ICONST", "f": "FCONST", "s": "SCONST"}
_MARKS = {"i": "\x00i", "f": "\x00f", "s": "\x00s"}
_CONSTANTS = frozenset({"ICONST", "FCONST", "SCONST", "BCONST", "XCONST", "USCONST"})
LIMIT = 50_000
PROVE_LATER_CHARS = 4096  # a longer first text is proven at once: not kept for later


class Template(NamedTuple):
    key: str  # the fingerprint of its texts
    sql: str  # their normalized SQL
    checked: bool  # a second text was identified the full way and agreed
    first: tuple[str, list[tuple[int, int, str]]] | None = None  # text, constants: to prove


class Found(NamedTuple):
    """A text's template key, constants and literals, and what is known of the template."""

    text: str
    key: str
    constants: list[tuple[int, int, str]]
    literals: tuple[str, ...]
    template: Template | bool | None  # False: never seen; None: no template for this key

    @property
    def proven(self) -> tuple[str, str] | None:
        """(fingerprint, normalized SQL) when the template is proven and checked."""
        template = self.template
        if isinstance(template, Template) and template.checked:
            return template.key, template.sql
        return None


class Templates:
    """The templates met so far (at most LIMIT; then forgotten and learned again)."""

    def __init__(self) -> None:
        self.known: dict[str, Template | None] = {}
        self.new: dict[str, Template] = {}  # made or checked since `take_new`

    def take_new(self) -> dict[str, Template]:
        """The templates made or checked since the last call (for other parsers of the log)."""
        new, self.new = self.new, {}
        return new

    def adopt(self, templates: dict[str, Template]) -> None:
        """Another parser's templates, for keys this one has not met or not checked: a
        template made there is checked by this parser's next text of it, as by its own."""
        for key, template in templates.items():
            known = self.known.get(key, False)
            upgrade = isinstance(known, Template) and template.checked and not known.checked
            if known is False or upgrade:
                if len(self.known) > LIMIT:
                    self.known.clear()
                self.known[key] = template

    def find(self, text: str) -> Found | None:
        """The text's template; None when it has none (or may set a password, or EXPLAIN,
        which a constant's content may change)."""
        lowered = text.lower()
        if "password" in lowered or "explain" in lowered:
            return None
        cut = template_of(text)
        if cut is None:
            return None
        key, constants = cut
        return Found(text, key, constants, literals_of(text, constants), self.known.get(key, False))

    def learn(
        self, found: Found, key: str, sql: str, literals: tuple[str, ...], plain: bool
    ) -> None:
        """After a full identification of the text: its template's first text makes it, the
        second checks it and proves the first (`provable`); one that fails is dropped for good."""
        template = found.template
        if template is False:
            if len(self.known) > LIMIT:
                self.known.clear()
            made: Template | None = None
            if plain and literals == found.literals:
                if len(found.text) > PROVE_LATER_CHARS:
                    if provable(found.text, found.constants):
                        made = Template(key, sql, False)
                else:
                    made = Template(key, sql, False, (found.text, found.constants))
            self.known[found.key] = made
            if made is not None:
                self.new[found.key] = made
        elif isinstance(template, Template):
            agrees = (key, sql, literals) == (template.key, template.sql, found.literals)
            if agrees and template.first is not None:
                agrees = provable(*template.first)
            checked = Template(template.key, template.sql, True) if agrees else None
            self.known[found.key] = checked
            if checked is not None:
                self.new[found.key] = checked


def template_of(text: str) -> tuple[str, list[tuple[int, int, str]]] | None:
    """(key, constants as (start, end, kind)); None when the text has no template."""
    if not text.isascii():
        return None
    pieces: list[str] = []
    constants: list[tuple[int, int, str]] = []
    position = 0
    for match in _PIECES.finditer(text):
        kind = match.lastgroup
        if kind == "q":
            continue
        if kind == "x" or kind is None:
            return None
        start, end = match.span()
        pieces.append(text[position:start])
        pieces.append(_MARKS[kind])
        constants.append((start, end, kind))
        position = end
    if not constants:
        return None
    pieces.append(text[position:])
    return "".join(pieces), constants


def provable(text: str, constants: list[tuple[int, int, str]]) -> bool:
    """Whether the lexer finds exactly these constants and the parser makes each an A_Const
    (conditions (a) and (b) of the module's docstring)."""
    try:
        tokens = pg_parser.scan(text)
        tree = json.loads(pg_parser.parse_sql_json(text))
    except pg_parser.ParseError:
        return False
    found = [(t.start, t.end + 1, t.name) for t in tokens if t.name in _CONSTANTS]
    if found != [(start, end, _KINDS[kind]) for start, end, kind in constants]:
        return False
    places: set[int] = set()
    _a_const_places(tree, places)
    return all(start in places for start, _, _ in constants)


def _a_const_places(node: Any, places: set[int]) -> None:
    if isinstance(node, dict):
        for name, value in node.items():
            if name == "A_Const" and isinstance(value, dict):
                location = value.get("location")
                if isinstance(location, int):
                    places.add(location)
            _a_const_places(value, places)
    elif isinstance(node, list):
        for value in node:
            _a_const_places(value, places)


def literals_of(text: str, constants: list[tuple[int, int, str]]) -> tuple[str, ...]:
    return tuple(text[start:end] for start, end, _ in constants)
