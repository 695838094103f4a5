"""Server events in a log that can explain a plan change: setting changes and reloads, server
starts (with the version), autovacuum and autoanalyze (log_autovacuum_min_duration), and DDL
or maintenance statements recorded by log_statement (CREATE/DROP INDEX, ALTER TABLE, ANALYZE,
VACUUM, CLUSTER, REINDEX).

Readers pass every message that is not a plan through `event_of`; a cheap search for the
words of these messages (`EVENT_HINT`) comes first, so ingest speed does not depend on them.
Plans' logged `Settings` are cut out by `plan_settings`; their changes are found when reading.
"""

from __future__ import annotations

import re
from datetime import datetime

from detector.model.log_rows import LogEventRow

EVENT_HINT = re.compile(
    rb"changed to|SIGHUP|accept connections|starting PostgreSQL|automatic |statement: "
    rb"|execute [^:\n]{1,64}: "
)
_HINT_TEXT = re.compile(EVENT_HINT.pattern.decode())
MESSAGE_LIMIT = 300
KINDS = ("setting", "reload", "start", "autovacuum", "autoanalyze", "ddl")

_SETTING = re.compile(r'parameter "([^"]+)" changed to "(.*)"')
_START = re.compile(r"starting PostgreSQL (\d+(?:\.\d+)?)")
_AUTO = re.compile(
    r'automatic (?:aggressive )?(vacuum|analyze)(?: to prevent wraparound)? of table "([^"]+)"'
)
_STATEMENT = re.compile(r"(?:statement|execute [^:]*): (.*)", re.S)
_DDL = re.compile(
    r"\s*(?:"
    r"create\s+(?:unique\s+)?index\s+(?:concurrently\s+)?(?:if\s+not\s+exists\s+)?(?:\S+\s+)?"
    r"on\s+(?:only\s+)?(?P<create>[\w.\"]+)"
    r"|drop\s+index\s+(?:concurrently\s+)?(?:if\s+exists\s+)?(?P<drop>[\w.\"]+)"
    r"|alter\s+table\s+(?:if\s+exists\s+)?(?:only\s+)?(?P<alter>[\w.\"]+)"
    r"|reindex\s+(?:\([^)]*\)\s+)?(?:table|index)\s+(?:concurrently\s+)?(?P<reindex>[\w.\"]+)"
    r"|cluster\s+(?:\([^)]*\)\s+)?(?:verbose\s+)?(?P<cluster>[\w.\"]+)?"
    r"|(?:analyze|analyse|vacuum)\b(?:\s*\([^)]*\))?(?:\s+(?:verbose|full|freeze|analyze))*"
    r"\s*(?P<maintain>[\w.\"]+)?"
    r")",
    re.I,
)


def may_be_event(data: bytes) -> bool:
    return EVENT_HINT.search(data) is not None


def event_of(
    message: str,
    line: int,
    offset: int,
    time: datetime | None,
    pid: int | None = None,
    database: str | None = None,
) -> LogEventRow | None:
    """The event a log message (its first line, after the prefix and level) records, if any."""
    if _HINT_TEXT.search(message) is None:
        return None
    message = message.removeprefix("LOG:  ")
    found = _classify(message)
    if found is None:
        return None
    kind, subject, value = found
    text = message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 3] + "..."
    return LogEventRow(line, offset, time, pid, database, kind, subject, value, text)


def _classify(message: str) -> tuple[str, str | None, str | None] | None:
    if match := _SETTING.search(message):
        return "setting", match.group(1), match.group(2)
    if "received SIGHUP" in message:
        return "reload", None, None
    if match := _START.search(message):
        return "start", match.group(1), None
    if "ready to accept connections" in message:
        return "start", None, None
    if match := _AUTO.search(message):
        return f"auto{match.group(1)}", _table(match.group(2), drop_database=True), None
    if (statement := _STATEMENT.search(message)) and (ddl := _DDL.match(statement.group(1))):
        names = [name for name in ddl.groupdict().values() if name]
        return "ddl", _table(names[0]) if names else None, None
    return None


def _table(name: str, *, drop_database: bool = False) -> str:
    """A relation name as plan_nodes.relation has it: schema.table, unquoted, no database."""
    parts = [part.strip('"') for part in name.split(".")]
    if drop_database and len(parts) == 3:
        parts = parts[1:]
    return ".".join(parts)


_SETTINGS_JSON = re.compile(rb'"Settings": \{([^}]*)\}')
_SETTINGS_TEXT = re.compile(rb"(?:^|\n)\s*Settings: ([^\n]*)")
_JSON_PAIR = re.compile(r'"([^"]+)": "((?:[^"\\]|\\.)*)"')


def plan_settings(body: bytes | str) -> str | None:
    """The plan's logged Settings (auto_explain.log_settings) as `name = 'value', ...` in the
    text format's order; None when the plan has none (all settings at their defaults)."""
    at = body.find("Settings" if isinstance(body, str) else b"Settings")  # type: ignore[arg-type]
    if at < 0:
        return None
    piece = body[max(0, at - 8) : at + 8192]
    raw = piece.encode() if isinstance(piece, str) else piece
    if match := _SETTINGS_JSON.search(raw):
        pairs = _JSON_PAIR.findall(match.group(1).decode("utf-8", "replace"))
        return ", ".join(f"{name} = '{value}'" for name, value in pairs) or None
    if match := _SETTINGS_TEXT.search(raw):
        return match.group(1).decode("utf-8", "replace").strip() or None
    return None
