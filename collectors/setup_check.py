"""`planshift setup-check`: is a server set up for postmortems, and what would planshift change?

Reads the settings that decide what auto_explain and pg_stat_statements record (and how the
log can be read back), compares them with planshift's recommendations, and says what each
costs. Overhead figures: auto_explain.log_min_duration = 0 costs ~30% TPS in third-party
pgbench runs, >= 1 ms is within noise; log_timing = on ~5% (per-node clock reads).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

RECOMMENDED_PREFIX = "%m [%p] %q%u@%d qid=%Q "
UNREADABLE_HINT = (
    "unreadable by this role: grant it pg_read_all_settings, or connect as a superuser"
)


@dataclass(frozen=True)
class Check:
    setting: str
    current: str | None  # None: not set / not available (library not loaded)
    recommended: str
    ok: bool
    why: str  # what it gives planshift, and what it costs
    readable: bool = True  # False: the role may not read it (pg_read_all_settings)

    @property
    def status(self) -> str:
        if not self.readable:
            return "unknown"
        return "ok" if self.ok else ("missing" if self.current is None else "change")


def _settings(
    conn: psycopg.Connection[Any], names: list[str]
) -> tuple[dict[str, str | None], set[str]]:
    """Values of the settings (None: not set), and the names this role may not read."""
    try:
        with conn.transaction():
            rows = conn.execute(
                "SELECT n, current_setting(n, true) FROM unnest(%s::text[]) AS n", [names]
            ).fetchall()
        return {str(name): value for name, value in rows}, set()
    except psycopg.errors.InsufficientPrivilege:
        pass
    values: dict[str, str | None] = {}
    hidden: set[str] = set()
    for name in names:
        try:
            with conn.transaction():
                row = conn.execute("SELECT current_setting(%s, true)", [name]).fetchone()
            values[name] = row[0] if row else None
        except psycopg.errors.InsufficientPrivilege:
            values[name] = None
            hidden.add(name)
    return values, hidden


def _duration_ms(text: str | None) -> float | None:
    if text is None:
        return None
    value = text.strip()
    units = {"us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60000.0, "h": 3600000.0}
    for unit, factor in sorted(units.items(), key=lambda item: -len(item[0])):
        if (
            value.endswith(unit)
            and value[: -len(unit)].strip().lstrip("-").replace(".", "").isdigit()
        ):
            return float(value[: -len(unit)]) * factor
    try:
        return float(value)
    except ValueError:
        return None


_RULES: list[tuple[str, str, Callable[[str | None], bool], str]] = [
    ("auto_explain.log_format", "json", lambda v: v == "json",
     "exact plans (planshift also reads text); no extra cost"),
    ("auto_explain.log_min_duration", "1ms",
     lambda v: (d := _duration_ms(v)) is not None and d >= 1,
     "logs every plan slower than 1 ms: within noise; 0 (every statement) costs ~30% TPS, "
     "-1 logs nothing"),
    ("auto_explain.sample_rate", "1", lambda v: v is not None and float(v) > 0,
     "fraction of statements explained; lower it (0.1) on very busy servers to bound log volume"),
    ("auto_explain.log_analyze", "on", lambda v: v == "on",
     "actual rows and buffers per node; instruments every statement, even those not logged"),
    ("auto_explain.log_timing", "off", lambda v: v == "off",
     "per-node timing: on costs ~5% more; the duration of the log line is enough for planshift"),
    ("auto_explain.log_buffers", "on", lambda v: v == "on",
     "shared hit/read per plan (needs log_analyze): buffer amplification after a flip"),
    ("auto_explain.log_verbose", "on", lambda v: v == "on",
     "Query Identifier and schema-qualified relations; a larger log, no measurable CPU"),
    ("auto_explain.log_settings", "on", lambda v: v == "on",
     "non-default planner settings in each plan: explains setting-driven flips"),
    ("auto_explain.log_parameter_max_length", "-1", lambda v: v in (None, "-1"),
     "bound parameter values (PostgreSQL 16+): plans depend on them; they are data, mind privacy"),
    ("compute_query_id", "auto", lambda v: v in ("on", "auto"),
     "query identifiers for log lines (%Q) and pg_stat_statements; negligible"),
    ("log_line_prefix", RECOMMENDED_PREFIX,
     lambda v: v is not None and all(e in v for e in ("%p", "%Q")) and ("%m" in v or "%t" in v),
     "time, pid (to reassemble interleaved lines) and query id on every line"),
    ("logging_collector", "on", lambda v: v == "on",
     "the collector keeps concurrent backends' messages whole (or use csvlog/jsonlog)"),
    ("pg_stat_statements.track", "top", lambda v: v in ("top", "all"),
     "calls and time per statement between snapshots"),
    ("pg_stat_statements.max", "10000", lambda v: v is not None and int(v) >= 5000,
     "room before evictions (dealloc): evicted statements lose their history"),
    ("pg_stat_statements.track_planning", "off", lambda v: v in (None, "off"),
     "planning times: on adds contention on hot statements"),
    ("track_io_timing", "on", lambda v: v == "on",
     "I/O read time in plans and pgss; cheap where clock reads are (pg_test_timing)"),
]  # fmt: skip


def check_server(conn: psycopg.Connection[Any]) -> tuple[int, list[Check]]:
    """(server_version_num, the checks) for the server behind `conn`."""
    names = ["server_version_num", "shared_preload_libraries", "session_preload_libraries"]
    names += [rule[0] for rule in _RULES]
    values, hidden = _settings(conn, names)
    version = int(values["server_version_num"] or 0)
    preload = {
        lib.strip()
        for lib in f"{values['shared_preload_libraries'] or ''},{values['session_preload_libraries'] or ''}".split(
            ","
        )
        if lib.strip()
    }
    checks = [
        _unless_hidden(
            Check(
                "shared_preload_libraries",
                values["shared_preload_libraries"],
                "auto_explain,pg_stat_statements",
                {"auto_explain", "pg_stat_statements"} <= preload,
                "both libraries loaded at server start (a restart is needed to change it)",
            ),
            hidden,
        )
    ]
    for setting, recommended, good, why in _RULES:
        if setting.endswith("parameter_max_length") and version < 160000:
            continue
        current = values.get(setting)
        try:
            ok = good(current)
        except (TypeError, ValueError):
            ok = False
        checks.append(_unless_hidden(Check(setting, current, recommended, ok, why), hidden))
    extension = conn.execute(
        "SELECT extversion FROM pg_extension WHERE extname = 'pg_stat_statements'"
    ).fetchone()
    checks.append(
        Check(
            "CREATE EXTENSION pg_stat_statements",
            extension[0] if extension else None,
            "installed",
            extension is not None,
            "in the database `planshift snapshot` connects to",
        )
    )
    return version, checks


def _unless_hidden(check: Check, hidden: set[str]) -> Check:
    if check.setting not in hidden:
        return check
    return Check(
        check.setting, None, check.recommended, False, f"{UNREADABLE_HINT}; {check.why}", False
    )


def config_snippet(checks: list[Check]) -> str:
    """postgresql.conf lines for the checks that are not ok (commented out when unreadable)."""
    lines = [
        f"{'' if c.readable else '# could not read it; '}{c.setting} = '{c.recommended}'"
        for c in checks
        if not c.ok and not c.setting.startswith("CREATE")
    ]
    return "\n".join(lines)
