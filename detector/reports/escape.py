"""Escaping for each report format: names, SQL and plan shapes come from user files and logs.

Every text an attacker may control (query names and SQL, target and setting names, relation
names inside plan signatures, finding messages that quote them) goes through one of these
before it reaches a terminal, an XML document or a Markdown comment; the HTML reports' templates
escape what they print (detector.reports.html_env) after `visible`.
`visible` is the rule under all of them: escape sequences (CSI, OSC, DCS...) and C0/C1 control
characters are dropped, so a name reads the same in every format, and benign text is unchanged.
"""

from __future__ import annotations

import re

from rich.markup import escape as rich_escape

_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"  # CSI: cursor, colours, clear screen
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # OSC, DCS...
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]"  # any other escape sequence
)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_NOT_XML = re.compile("[\ufffe\uffff]")
_MARKDOWN = {
    "\\": "\\\\",
    "`": "\\`",
    "*": "\\*",
    "~": "\\~",
    "|": "\\|",
    "&": "&amp;",
    "<": "&lt;",
}


def visible(text: str, keep: str = "\n\t") -> str:
    """`text` without escape sequences and control characters (those in `keep` stay)."""
    text = _SEQUENCE.sub("", text.replace("\r\n", "\n"))
    return _CONTROL.sub(lambda m: m.group() if m.group() in keep else "", text)


def single_line(text: str) -> str:
    """Visible text on one line: newlines and tabs become spaces."""
    return visible(text).replace("\n", " ").replace("\t", " ")


def for_markup(text: str) -> str:
    """A value inside a rich markup string (`console.print(f"[bold]{...}[/]")`), on one line."""
    return rich_escape(single_line(text))


def for_xml(text: str) -> str:
    """Characters XML 1.0 allows, without the DEL and C1 controls it tolerates."""
    return _NOT_XML.sub("", visible(text))


def markdown_inline(text: str) -> str:
    """One line of Markdown (a table cell, a list item) that renders as the literal text.

    What could format, link, embed or break a table is escaped; brackets only where they
    could make a link (`](`, `![`, unbalanced) and `_` only where it could make emphasis, so
    `sweep_sum [n=100]` stays as it is.
    """
    text = single_line(text)
    unbalanced = _unbalanced_brackets(text)
    out = []
    for index, char in enumerate(text):
        before, after = text[index - 1 : index], text[index + 1 : index + 2]
        if char in _MARKDOWN:
            char = _MARKDOWN[char]
        elif char == "_" and not (before.isalnum() and after.isalnum()):
            char = "\\_"
        elif char == "[" and (index in unbalanced or before == "!"):
            char = "\\["
        elif char == "]" and (index in unbalanced or after == "("):
            char = "\\]"
        out.append(char)
    return "".join(out)


def _unbalanced_brackets(text: str) -> set[int]:
    opened: list[int] = []
    unbalanced: set[int] = set()
    for index, char in enumerate(text):
        if char == "[":
            opened.append(index)
        elif char == "]":
            if opened:
                opened.pop()
            else:
                unbalanced.add(index)
    return unbalanced | set(opened)


def markdown_code_span(text: str) -> str:
    """Inline code of any text: a backtick run longer than any inside it (CommonMark)."""
    text = single_line(text)
    fence = "`" * (_longest_backticks(text) + 1)
    if text.startswith("`") or text.endswith("`"):
        text = f" {text} "
    return f"{fence}{text}{fence}"


def markdown_code(text: str, info: str = "") -> str:
    """A fenced code block that no line of `text` can close: the fence is longer than any
    backtick run inside it (CommonMark)."""
    text = visible(text)
    fence = "`" * max(3, _longest_backticks(text) + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in re.findall("`+", text)), default=0)
