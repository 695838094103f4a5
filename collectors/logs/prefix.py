"""`log_line_prefix` as a regular expression, and the log's timestamps as UTC datetimes.

`compile_prefix('%m [%p] %q%u@%d ')` turns the server's prefix setting into a regex with named
groups (time, pid, user, database, queryid, ...) followed by the message severity
(`LOG:  `, `ERROR:  `, `DETAIL:  `...). `%q` makes the rest of the prefix optional, as the
server omits it for non-session processes. Without a known prefix, `guess_header` finds
a timestamp, a `[pid]`, `user=`/`db=`/`app=` pairs or `user@db`, and `qid=`/`query_id=`: the
common shapes (default `%m [%p] `, the README's `%m [%p] %q%u@%d qid=%Q `, pgBadger's
`%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h `).
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from detector.errors import PlanshiftError

LEVELS = (
    "LOG|ERROR|WARNING|NOTICE|INFO|FATAL|PANIC|DEBUG[1-5]?|DETAIL|HINT|STATEMENT|CONTEXT"
    "|QUERY|LOCATION"
)
_LEVEL = rf"(?P<level>{LEVELS}):  "
_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: ?[A-Za-z][A-Za-z0-9+-]*|[+-]\d\d(?::?\d\d)?)?"

# escape -> regex; named groups are what the reader uses
_ESCAPES: dict[str, str] = {
    "a": r"(?P<app>.*?)",
    "u": r"(?P<user>[^\s@,;:\[\]]*?)",
    "d": r"(?P<database>[^\s@,;:\[\]]*?)",
    "r": r"(?:\S*?)",
    "h": r"(?:\S*?)",
    "L": r"(?:\S*?)",
    "b": r"(?:.*?)",
    "p": r"(?P<pid>\d+)",
    "P": r"(?:\d*)",
    "t": rf"(?P<time>{_TIME})",
    "m": rf"(?P<time>{_TIME})",
    "n": r"(?P<epoch>\d+(?:\.\d+)?)",
    "i": r"(?:.*?)",
    "e": r"(?:[0-9A-Z]{5})",
    "c": r"(?:[0-9a-f]+\.[0-9a-f]+)",
    "l": r"(?:\d+)",
    "s": rf"(?:{_TIME})",
    "v": r"(?:\S*?)",
    "x": r"(?:\d+)",
    "Q": r"(?P<queryid>-?\d+)",
}
_ESCAPE = re.compile(r"%(-?\d*)([a-zA-Z%])")

_SPLIT = re.compile(r"^(?P<prefix>.{0,400}?)" + _LEVEL)
_GUESS_TIME = re.compile(rf"(?P<time>{_TIME})|(?P<epoch>\b\d{{10}}\.\d{{3}}\b)")
_GUESS_PID = re.compile(r"\[(\d+)(?:-\d+)?\]")
_GUESS_USER = re.compile(r"\buser=([^\s,@]+)")
_GUESS_DB = re.compile(r"\bdb=([^\s,@]+)")
_GUESS_USER_AT_DB = re.compile(r"(?:^|\s)([A-Za-z_][\w$-]*)@([A-Za-z_][\w$-]*)(?=[\s,/:]|$)")
_COMMON = re.compile(  # '%m [%p] ' and '%m [%p] %q%u@%d [app=%a ]qid=%Q ': one match, no guessing
    rf"^(?P<time>{_TIME}) \[(?P<pid>\d+)\] (?:(?P<user>[^\s@,;:\[\]]*)@(?P<database>[^\s@,;:\[\]]*)"
    rf" (?:app=(?P<app>[^\s,]*) )?(?:qid=(?P<queryid>-?\d+) )?)?{_LEVEL}"
)
_GUESS_APP = re.compile(r"\b(?:app|application(?:_name)?)=([^\s,]*)")
_GUESS_QUERYID = re.compile(r"\b(?:qid|queryid|query_id)=(-?\d+)\b")


class Header(NamedTuple):
    """What a header line's prefix says; `end` is where the message starts."""

    level: str
    end: int
    time: str | None = None
    epoch: str | None = None
    pid: str | None = None
    user: str | None = None
    database: str | None = None
    queryid: str | None = None
    app: str | None = None


QUERYIDS = range(-(2**63), 2**63)  # a query id is a signed 64-bit integer (int8)


def queryid_of(text: str | None) -> tuple[int | None, str | None]:
    """The `%Q` of a header as a query id, and why not when it cannot be one: a value outside
    the 64-bit range (one flipped byte of a log) is read as unknown, as jsonlog's is."""
    if not text:
        return None, None
    try:
        value = int(text)
    except ValueError:
        return None, f"query id {text[:40]!r} is not a number: read as unknown"
    if value not in QUERYIDS:
        return None, f"query id {text[:40]} is outside the 64-bit range: read as unknown"
    return value, None


class PrefixParser:
    """Header lines of a stderr log: by the compiled `log_line_prefix`, or by guessing."""

    def __init__(self, prefix: str | None) -> None:
        self.prefix = prefix
        self._regex = compile_prefix(prefix) if prefix is not None else None

    def parse(self, line: str) -> Header | None:
        if self._regex is not None:
            match = self._regex.match(line)
            if match is None:
                return None
            groups = match.groupdict()
            return Header(
                groups["level"],
                match.end(),
                groups.get("time"),
                groups.get("epoch"),
                groups.get("pid"),
                groups.get("user"),
                groups.get("database"),
                groups.get("queryid"),
                groups.get("app"),
            )
        return guess_header(line)


def guess_header(line: str) -> Header | None:
    """Without the prefix setting: a timestamp, `[pid]`, `user=`/`db=` or `user@db` pairs."""
    common = _COMMON.match(line)
    if common is not None:
        found = common.group
        return Header(
            found("level"), common.end(), found("time"), None, found("pid"), found("user"),
            found("database"), found("queryid"), found("app"),
        )  # fmt: skip
    split = _SPLIT.match(line)
    if split is None:
        return None
    prefix = split.group("prefix")
    when = _GUESS_TIME.search(prefix)
    pid = _GUESS_PID.search(prefix)
    user = _GUESS_USER.search(prefix)
    database = _GUESS_DB.search(prefix)
    user_name = user.group(1) if user else None
    database_name = database.group(1) if database else None
    if user is None and database is None:
        pair = _GUESS_USER_AT_DB.search(prefix[when.end() if when else 0 :])
        if pair:
            user_name, database_name = pair.groups()
    queryid = _GUESS_QUERYID.search(prefix) if "id=" in prefix else None
    app = _GUESS_APP.search(prefix) if "=" in prefix else None
    return Header(
        split.group("level"),
        split.end(),
        when.group("time") if when else None,
        when.group("epoch") if when else None,
        pid.group(1) if pid else None,
        user_name,
        database_name,
        queryid.group(1) if queryid else None,
        app.group(1) if app else None,
    )


@functools.lru_cache(maxsize=64)
def compile_prefix(prefix: str) -> re.Pattern[str]:
    """A regex matching one header line: the prefix, then `LEVEL:  `; the message follows."""
    parts: list[str] = []
    optional_from: int | None = None
    seen: set[str] = set()
    position = 0
    for match in _ESCAPE.finditer(prefix):
        parts.append(re.escape(prefix[position : match.start()]))
        padding, escape = match.groups()
        position = match.end()
        if escape == "%":
            parts.append("%")
            continue
        if escape == "q":
            optional_from = len(parts)
            continue
        if escape not in _ESCAPES:
            raise PlanshiftError(
                f"log_line_prefix {prefix!r}: unknown escape %{escape}",
                "copy log_line_prefix from the server (SHOW log_line_prefix)",
            )
        pattern = _ESCAPES[escape]
        group = re.search(r"\?P<(\w+)>", pattern)
        if group and group.group(1) in seen:  # a second %m or %t: match it, don't capture
            pattern = re.sub(r"\?P<\w+>", "?:", pattern)
        elif group:
            seen.add(group.group(1))
        parts.append(r" *" + pattern + r" *" if padding else pattern)
    parts.append(re.escape(prefix[position:]))
    if optional_from is not None:
        parts[optional_from:] = ["(?:" + "".join(parts[optional_from:]) + ")?"]
    return re.compile("^" + "".join(parts) + _LEVEL)


class TimeParser:
    """Log timestamps to naive UTC datetimes, fast: whole seconds are cached per text.

    Numeric offsets and UTC/GMT are exact; another abbreviation (CET, PST) is read in
    `default_zone` (the --log-timezone option), and the parser remembers it saw one.
    """

    def __init__(self, default_zone: str | None = None) -> None:
        try:
            self.zone: tzinfo = ZoneInfo(default_zone) if default_zone else UTC
        except ZoneInfoNotFoundError as exc:
            raise PlanshiftError(
                f"unknown time zone {default_zone!r}", "use an IANA name such as Europe/Paris"
            ) from exc
        self._cache: dict[str, datetime] = {}
        self.unknown_zones: set[str] = set()

    def parse(self, text: str) -> datetime | None:
        if text.endswith(" UTC"):  # the common case, in C
            try:
                return datetime.fromisoformat(text[:-4])
            except ValueError:
                pass
        head, rest = text[:19], text[19:]
        fraction = ""
        if rest.startswith("."):
            fraction, _, zone = rest[1:].partition(" ")
        else:
            zone = rest.strip()
        key = head + zone
        base = self._cache.get(key)
        if base is None:
            base = self._base(head, zone)
            if base is None:
                return None
            if len(self._cache) > 200_000:
                self._cache.clear()
            self._cache[key] = base
        if fraction.isdigit():
            return base + timedelta(microseconds=int(fraction.ljust(6, "0")[:6]))
        return base

    def _base(self, head: str, rest: str) -> datetime | None:
        try:
            moment = datetime.strptime(head, "%Y-%m-%d %H:%M:%S")
        except ValueError:
            return None
        zone: tzinfo
        if rest in ("", "UTC", "GMT", "Z", "+00", "-00"):
            zone = UTC
        elif rest[0] in "+-" and rest[1:].replace(":", "").isdigit():
            digits = rest[1:].replace(":", "")
            minutes = int(digits[:2]) * 60 + (int(digits[2:4]) if len(digits) >= 4 else 0)
            zone = timezone(timedelta(minutes=minutes if rest[0] == "+" else -minutes))
        else:
            self.unknown_zones.add(rest)
            zone = self.zone
        return moment.replace(tzinfo=zone).astimezone(UTC).replace(tzinfo=None)

    def epoch(self, text: str) -> datetime | None:
        try:
            return datetime.fromtimestamp(float(text), UTC).replace(tzinfo=None)
        except (ValueError, OverflowError, OSError):  # digits damaged past year 9999
            return None
