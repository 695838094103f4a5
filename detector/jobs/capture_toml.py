"""A captured workload as a workload file: the text `planshift capture` writes to workload.toml.

Written by hand (the standard library reads TOML, it does not write it), in the loader's own
vocabulary (detector.jobs.workload): one [[queries]] table per statement with its production
weight (`calls`, `mean_ms`), the pg_stat_statements text with each $n turned into a %(pN)s
placeholder fed by a `values` generator (all generators of a query cycle in step, so sample i
replays the parameters of one logged execution), or `generic_plan = true` with the $n kept
when no execution's parameters were seen (a $n where the grammar wants a literal, `date $1`,
written as the cast the server parses: collectors/capture/constants.py). Production's planner
settings go to [settings], what the capture saw of production to [capture].
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pglast import parser as pg_parser

from collectors.capture.constants import generic_text, literal_params

INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class CapturedQuery:
    name: str
    sql: str  # pg_stat_statements text, $n kept
    queryids: tuple[int, ...]  # pg_stat_statements entries of the text (simple, extended)
    calls: int
    mean_ms: float
    total_ms: float
    samples: tuple[Mapping[int, Any], ...]  # {n: value} per logged execution; () if none

    def as_sent(self) -> tuple[str, dict[str, Any] | None, bool]:
        """(SQL, parameters of the first sample, generic plan) as the workload file sends it."""
        if self.samples and _params(self.sql):
            first = {f"p{number}": value for number, value in self.samples[0].items()}
            return placeholder_sql(self.sql), first, False
        if _params(self.sql):
            return generic_text(self.sql), None, True
        return self.sql, None, False

    @property
    def mode(self) -> str:
        if not _params(self.sql):
            return "as captured"
        return f"{len(self.samples)} parameter sets" if self.samples else "generic plan"


def query_name(relations: Sequence[str], key: str, taken: set[str]) -> str:
    """`pgbench_accounts_e86ca6`: the first relation the query reads and the end of its query
    key (the parse-tree fingerprint), so a statement keeps its name from one capture to the
    next whatever else production ran (a comparison across runs pairs queries by name)."""
    first = relations[0].rsplit(".", 1)[-1] if relations else "expression"
    suffix = re.sub(r"[^0-9a-f]", "", key.rpartition(":")[2].lower())[-6:]
    base = re.sub(r"[^a-z0-9_]+", "_", f"{first}_{suffix}".lower()).strip("_") or "query"
    name, number = base, 1
    while name in taken:
        number += 1
        name = f"{base}_{number}"
    taken.add(name)
    return name


def toml_string(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's; DEL must be escaped as well)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and INT64[0] <= value <= INT64[1]:
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return toml_string(str(value))


def sql_block(sql: str) -> str:
    """Multi-line literal string when it can hold the SQL as written, else a basic string."""
    if "'''" not in sql and not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", sql):
        return f"'''\n{sql}'''"
    return toml_string(sql)


def placeholder_sql(sql: str) -> str:
    """$n -> %(pn)s, and every other `%` doubled (psycopg reads the text as a format)."""
    pieces, position = [], 0
    for token in _params(sql):
        pieces.append(sql[position : token.start].replace("%", "%%"))
        pieces.append(f"%(p{sql[token.start + 1 : token.end + 1]})s")
        position = token.end + 1
    pieces.append(sql[position:].replace("%", "%%"))
    return "".join(pieces)


def _params(sql: str) -> list[Any]:
    try:
        return [t for t in pg_parser.scan(sql) if t.name == "PARAM"]
    except pg_parser.ParseError:
        return []


def workload_toml(
    *,
    name: str,
    header: Sequence[str],
    setup_files: Sequence[str],
    queries: Sequence[CapturedQuery],
    not_captured: Sequence[str],
    repetitions: int = 10,
    settings: Mapping[str, str] | None = None,
    setting_notes: Mapping[str, str] | None = None,
    not_carried: Sequence[str] = (),
    capture: Mapping[str, str | Sequence[str]] | None = None,
) -> str:
    lines = [f"# {line}" for line in header]
    lines += [
        "",
        "[workload]",
        f"name = {toml_string(name)}",
        f"description = {toml_string('captured by planshift capture; weights from pg_stat_statements')}",
        f"repetitions = {repetitions}",
        "warmup = 2",
        "",
        "[setup]",
        f"files = [{', '.join(toml_string(f) for f in setup_files)}]",
    ]
    if capture:
        lines += ["", "[capture]  # what planshift capture saw of production (reports show it)"]
        for key, value in capture.items():
            if isinstance(value, str):
                lines.append(f"{key} = {toml_string(value)}")
            elif not value:
                lines.append(f"{key} = []")
            else:
                lines.append(f"{key} = [")
                lines += [f"  {toml_string(item)}," for item in value]
                lines.append("]")
    if settings or not_carried:
        lines += ["", "[settings]  # production's: set on every replay target; a variant's wins"]
        notes = setting_notes or {}
        for name, value in (settings or {}).items():
            note = f"  # {notes[name]}" if name in notes else ""
            lines.append(f"{name} = {toml_string(value)}{note}")
        lines += [f"# not carried: {line}" for line in not_carried]
    for query in queries:
        lines += ["", "[[queries]]"]
        lines.append(
            f"# queryid {', '.join(map(str, query.queryids))}: {query.calls} calls, {query.mean_ms:.4g} ms mean, "
            f"{query.total_ms:.6g} ms total; {query.mode}"
        )
        lines.append(f"name = {toml_string(query.name)}")
        numbers = sorted({int(query.sql[t.start + 1 : t.end + 1]) for t in _params(query.sql)})
        if numbers and query.samples:
            lines.append(f"sql = {sql_block(placeholder_sql(query.sql))}")
        elif numbers:
            literals = literal_params(query.sql)
            if literals:
                shown = ", ".join(f"${n}" for n in literals)
                lines.append(f"# {shown} stood for typed or keyword constants: written as casts")
            lines.append(f"sql = {sql_block(generic_text(query.sql))}")
            lines.append("generic_plan = true  # no execution's parameters were seen")
        else:
            lines.append(f"sql = {sql_block(query.sql)}")
        lines.append(f"calls = {query.calls}")
        lines.append(f"mean_ms = {round(query.mean_ms, 6)!r}")
        if numbers and query.samples:
            lines.append("[queries.params]")
            for number in numbers:
                values = ", ".join(toml_value(sample[number]) for sample in query.samples)
                lines.append(f"p{number} = {{ values = [{values}] }}")
    if not_captured:
        lines += ["", "# not captured:"] + [f"#   {line}" for line in not_captured]
    return "\n".join(lines) + "\n"
