"""One auto_explain entry -> a parsed plan with its query identity, duration and parameters.

auto_explain writes `duration: 1.234 ms  plan:` and then, in JSON format, an object with
"Query Text", "Query Parameters" (16+), "Plan", "Settings" and "Query Identifier" (verbose);
in text format the same as `Key: value` lines around the indented plan tree. The duration of
the log line is the execution time: the plan has none when log_analyze is off.

Query identity: the libpg_query fingerprint of the entry's own text (pglast), the same key the
EXPLAIN runner gives a workload query, so logs and runs meet, whatever the log format. A
queryid (%Q, the csvlog/jsonlog field, the plan's "Query Identifier") is only a label: a
nested statement's record carries its caller's id, and without pg_stat_statements every id is
0, so an id is kept only when it is nonzero and never seen with another text (`QueryKeys.label`).
Literal values are kept per observation: bound parameters from "Query Parameters", inline
constants (simple protocol) from the SQL lexer. An EXPLAIN without ANALYZE is planned, not run:
its entry is a plan with no duration.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from pglast import ast, parse_sql
from pglast import parser as pg_parser

from collectors.logs.formats import JSONError, RawEntry, loads
from collectors.logs.prefix import QUERYIDS
from collectors.logs.redact import anonymize_sql, redact_passwords, sets_password
from collectors.logs.templates import Templates
from collectors.logs.textplan import parse_text_plan
from detector.errors import PlanshiftError
from detector.model import Plan, parse_plan
from detector.model.identity import normalize, text_query_key
from detector.model.plan import plan_parameters

_DURATION = re.compile(r"^duration: ([\d.]+) ms")
_PARAMETER = re.compile(r"\$(\d+) = (?:'((?:[^']|'')*)'|(NULL))(?:, |$)")
_OTHER_FORMATS = (  # the first line of a plan in auto_explain.log_format yaml or xml
    (" (auto_explain.log_format = yaml: planshift reads json and text)", 'Query Text: "'),
    (" (auto_explain.log_format = xml: planshift reads json and text)", "<explain xmlns="),
)
_REFERENCE = re.compile(rb"(?<![\w$])\$(\d+)")  # not in a name such as col$1
_RETURNS = re.compile(rb"returns ((?:\$\d+(?:, )?)+)")  # InitPlan 1 (returns $0,$1): 15-16
_QUOTED = re.compile(rb"'(?:[^']|'')*'")  # a literal, where `$1` is text
_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")
_DIGITS = frozenset(b"0123456789")
_TEXT_KEYS = ("Query Text: ", "Query Parameters: ", "Query Identifier: ", "Settings: ")
CACHE_LIMIT = 50_000
LABEL_LIMIT = 500_000  # queryids remembered for QueryKeys.label
_FALSE = frozenset({"false", "off", "0", "no"})

_json_string = json.encoder.encode_basestring_ascii  # what json.dumps uses for str values


class EntryError(Exception):
    """An entry that cannot be read: `kind` is the problem kind (bad-json, bad-plan)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class LoggedPlan(NamedTuple):
    duration_ms: float | None  # the log line's duration
    query_text: str
    params: str  # JSON object {"$1": "5"}; "" when the entry has none
    document: dict[str, Any]  # auto_explain JSON (text plans converted), parse_plan accepts it
    raw: bytes | str  # the entry's plan as logged (JSON plans), for plan_json
    queryid: int | None
    plan_format: str  # json | text

    @property
    def analyzed(self) -> bool:
        return isinstance(self.document["Plan"].get("Actual Rows"), (int, float))

    def plan_json(self) -> str:
        """The plan as JSON text (stderr's tab indentation removed), for the plans table."""
        if self.plan_format == "text":
            return json.dumps(self.document)
        return plan_json_text(self.raw)

    def plan(self) -> Plan:
        return parse_plan(self.document)


def plan_json_text(raw: bytes | str) -> str:
    """A logged JSON plan as JSON text, stderr's tab indentation removed."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    if "\n\t" in text:
        text = text.replace("\n\t", "\n").lstrip("\t")
    return text.strip()


def is_generic(body: bytes | str) -> bool | None:
    """Whether a logged plan is a prepared statement's generic plan: its expressions reference
    `$1`, `$2` ... (`detector.model.plan.plan_parameters`), where a custom plan has the values.

    Read from the JSON text (this runs once per logged plan): a `$n` after its "Plan" key that
    is neither inside a quoted literal nor an InitPlan's output (`returns $0`, 15-16). None for
    a text plan with a `$n`: `generic_plan` reads the parsed plan."""
    raw = body.encode() if isinstance(body, str) else body
    start = raw.find(b'"Plan"')
    at = raw.find(b"$", start if start > 0 else 0)
    end = len(raw) - 1
    while at >= 0 and (at == end or raw[at + 1] not in _DIGITS or raw[at - 1] in _NAME_BYTES):
        at = raw.find(b"$", at + 1)
    if at < 0:
        return False
    if start < 0:
        return None
    region = raw[start:]
    if b"'" not in region and b"returns $" not in region:
        return True
    produced = set(_REFERENCE.findall(b" ".join(_RETURNS.findall(region))))
    return bool(set(_REFERENCE.findall(_QUOTED.sub(b"", region))) - produced)


def generic_plan(document: dict[str, Any]) -> bool:
    """Whether a parsed logged plan is a generic plan (when `is_generic` cannot tell)."""
    return bool(plan_parameters(document["Plan"]))


def duration_of(head: str) -> float | None:
    """The `duration: 1.234 ms` of an auto_explain message's first line."""
    end = head.find(" ms", 10)
    if head.startswith("duration: ") and end > 10 and head[10:end].replace(".", "", 1).isdigit():
        return float(head[10:end])
    match = _DURATION.match(head)
    try:
        return float(match.group(1)) if match else None
    except ValueError:  # `1.2.3`: a damaged line
        return None


@dataclass(frozen=True)
class QueryIdentity:
    key: str
    sql: str  # literals replaced by $n
    literals: tuple[str, ...]  # () when the text sets a password
    secret: bool = False  # the text sets a password: no parameter values are kept
    explain_only: bool = False  # EXPLAIN without ANALYZE: planned, never executed

    @cached_property
    def literals_json(self) -> str:
        """json.dumps(list(self.literals)), built directly (once per new text)."""
        return "[" + ", ".join(map(_json_string, self.literals)) + "]"


def explain_only(text: str) -> bool:
    """An EXPLAIN statement without ANALYZE (its logged duration is no execution's)."""
    if "explain" not in text[:200].lower():
        return False
    try:
        statements = parse_sql(text)
    except pg_parser.ParseError:
        return False
    if len(statements) != 1 or not isinstance(statements[0].stmt, ast.ExplainStmt):
        return False
    for option in statements[0].stmt.options or ():
        if option.defname == "analyze":
            value = getattr(option.arg, "sval", getattr(option.arg, "ival", None))
            return value is not None and str(value).lower() in _FALSE
    return True


def parameters_json(text: str) -> str:
    """auto_explain's `$1 = '5', $2 = NULL` as the JSON object {"$1": "5", "$2": null}
    (json.dumps' text, built directly: this runs once per logged execution)."""
    members = [
        f'"${number}": ' + ("null" if null else _json_string(value.replace("''", "'")))
        for number, value, null in _PARAMETER.findall(text)
    ]
    return "{" + ", ".join(members) + "}"


class QueryKeys:
    """Query identity from the text, cached per exact text and per template (`log_templates`:
    texts that differ only in plain constants); queryid labels checked against it.
    `anonymize`: the SQL is normalized even when the lexer fails (constants masked), and no
    literals are kept."""

    def __init__(self, anonymize: bool = False) -> None:
        self.anonymize = anonymize
        self.by_text: dict[str, QueryIdentity] = {}
        self.templates = Templates()
        self.owners: dict[int, str] = {}  # queryid -> the query key it was first seen with
        self.ambiguous: set[int] = set()  # queryids seen with two query keys
        self.found_ambiguous: list[int] = []  # since the caller last took them

    def identify(self, text: str) -> QueryIdentity:
        known = self.by_text.get(text)
        if known is not None:
            return known
        found = None if self.anonymize else self.templates.find(text)
        if found is not None and found.proven is not None:  # not kept per text: flat memory
            key, sql = found.proven
            return QueryIdentity(key, sql, found.literals)
        identity = self._compute(text)
        if found is not None:
            plain = not identity.secret and not identity.explain_only
            self.templates.learn(found, identity.key, identity.sql, identity.literals, plain)
        if len(self.by_text) > CACHE_LIMIT:
            self.by_text.clear()
        self.by_text[text] = identity
        return identity

    def label(self, queryid: int | None, key: str) -> int | None:
        """The queryid when it belongs to the query `key`: nonzero, and never seen with another
        text (a nested statement's record carries the calling statement's id)."""
        if not queryid or queryid in self.ambiguous or queryid not in QUERYIDS:
            return None
        owner = self.owners.get(queryid)
        if owner is None:
            if len(self.owners) > LABEL_LIMIT:
                self.owners.clear()
            self.owners[queryid] = key
        elif owner != key:
            self.ambiguous.add(queryid)
            self.found_ambiguous.append(queryid)
            return None
        return queryid

    def _compute(self, text: str) -> QueryIdentity:
        sql, literals = normalize(text)
        key = text_query_key(text, sql)
        secret = sets_password(text)
        planned = explain_only(text)
        if self.anonymize:
            return QueryIdentity(key, anonymize_sql(text), (), secret, planned)
        if secret:
            return QueryIdentity(key, redact_passwords(sql), (), secret, planned)
        return QueryIdentity(key, sql, literals, False, planned)


def read_entry(entry: RawEntry) -> LoggedPlan:
    """The plan of an auto_explain entry; EntryError when it is broken."""
    duration = duration_of(entry.head)
    body = entry.body
    if body[:2] == b"\t{" or body[:1] == "{" or body.lstrip()[:1] in (b"{", "{"):
        return _json_entry(body, duration, entry.queryid)
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return _text_entry(text, duration, entry.queryid)


def _json_entry(body: bytes | str, duration: float | None, queryid: int | None) -> LoggedPlan:
    try:
        document = loads(body)
    except JSONError as exc:
        raise EntryError("bad-json", f"plan JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("Plan"), dict):
        raise EntryError("bad-plan", "JSON plan without a Plan object")
    query = document.get("Query Text")
    params = document.get("Query Parameters")
    identifier = document.get("Query Identifier")
    return LoggedPlan(
        duration_ms=duration,
        query_text=query if isinstance(query, str) else "",
        params=parameters_json(params) if isinstance(params, str) else "",
        document=document,
        raw=body,
        queryid=identifier if isinstance(identifier, int) else queryid,
        plan_format="json",
    )


def _text_entry(text: str, duration: float | None, queryid: int | None) -> LoggedPlan:
    lines = text.replace("\n\t", "\n").lstrip("\t").split("\n")
    fields: dict[str, str] = {}
    query_lines: list[str] = []
    collecting = False
    plan_lines: list[str] = []
    for line in lines:
        if not plan_lines:
            key = next((k for k in _TEXT_KEYS if line.startswith(k)), None)
            if key == "Query Text: ":
                query_lines, collecting = [line[len(key) :]], True
                continue
            if key is not None:
                fields[key] = line[len(key) :]
                collecting = False
                continue
            if "  (cost=" in line and not line.startswith(" "):
                plan_lines.append(line)
            elif collecting:
                query_lines.append(line)
            continue
        key = (
            next((k for k in _TEXT_KEYS if line.startswith(k)), None) if line[:1] in "QS" else None
        )
        if key is not None:
            fields[key] = line[len(key) :]
        elif line and not line.startswith(("JIT:", "Planning", "Execution", "Trigger")):
            plan_lines.append(line)
    if not plan_lines:
        written = next((f for f, mark in _OTHER_FORMATS if lines and lines[0].startswith(mark)), "")
        raise EntryError("bad-plan", f"no plan in the text entry{written}")
    try:
        root = parse_text_plan(plan_lines)
    except PlanshiftError as exc:
        raise EntryError("bad-plan", str(exc)) from None
    query = "\n".join(query_lines)
    document: dict[str, Any] = {"Query Text": query, "Plan": root}
    identifier = fields.get("Query Identifier: ", "")
    if identifier.lstrip("-").isdigit():
        queryid = int(identifier)
        document["Query Identifier"] = queryid
    params = fields.get("Query Parameters: ")
    return LoggedPlan(
        duration_ms=duration,
        query_text=query,
        params=parameters_json(params) if params else "",
        document=document,
        raw="",
        queryid=queryid,
        plan_format="text",
    )
