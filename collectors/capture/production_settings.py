"""Production's planner settings, read from the source so that every replay target runs them.

Three levels set a value for the application's sessions, each over the one before:
the server (pg_settings whose source is the configuration file, ALTER SYSTEM or the command
line), the database (ALTER DATABASE ... SET) and the application's roles (ALTER ROLE ... [IN
DATABASE ...] SET, from pg_db_role_setting). The roles are those that ran the captured
statements (pg_stat_statements' userid); when they disagree, the value of the role with the
most production time wins and the disagreement is said. The capture session's own settings
(its role's, its client's) are never read as production's. Kept: the settings the taxonomy
carries (detector.model.settings.carried_setting) that a session can set; those that need a
restart or a reload (shared_buffers, io_method) are listed as not carried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from detector.model.settings import IO_SETTINGS, MEMORY_SETTINGS, carried_setting

SERVER_SOURCES = ("configuration file", "command line", "environment variable", "global")
SESSION_CONTEXTS = ("user", "superuser")
SETTINGS_SQL = (
    "SELECT name, current_setting(name), source, context, setting IS DISTINCT FROM boot_val "
    "FROM pg_settings"
)
# the server's values of settings the capture session's role or database overrides
FILE_SETTINGS_SQL = (
    "SELECT name, setting FROM pg_file_settings WHERE applied AND error IS NULL "
    "AND name = ANY(%s::text[])"
)
ROLE_SETTINGS_SQL = (
    "SELECT r.rolname, s.setrole = 0, s.setdatabase <> 0, s.setconfig "
    "FROM pg_db_role_setting s LEFT JOIN pg_roles r ON r.oid = s.setrole "
    "WHERE s.setdatabase IN (0, %s) AND (s.setrole = 0 OR r.rolname = ANY(%s::text[]))"
)
SETTINGS_SQLS = (SETTINGS_SQL, FILE_SETTINGS_SQL, ROLE_SETTINGS_SQL)  # what capture sends


@dataclass(frozen=True)
class ProductionSettings:
    values: dict[str, str] = field(default_factory=dict)  # carried: name -> value
    origins: dict[str, str] = field(default_factory=dict)  # name -> server | database | role R
    not_carried: dict[str, str] = field(default_factory=dict)  # name -> value (needs a restart)
    notes: list[str] = field(default_factory=list)  # roles that disagree, unreadable values


def read_settings(
    conn: psycopg.Connection[Any], database_oid: int, roles: Sequence[str]
) -> ProductionSettings:
    """Production's carried settings; `roles` by production time, most first."""
    found = ProductionSettings()
    contexts: dict[str, str] = {}
    masked: list[str] = []
    for name, value, source, context, moved in conn.execute(SETTINGS_SQL).fetchall():
        contexts[name] = context
        if not carried_setting(name) and name not in IO_SETTINGS + MEMORY_SETTINGS:
            continue
        if source in SERVER_SOURCES:
            _keep(found, name, str(value), "server", context, moved)
        elif source in ("user", "database", "database user") and carried_setting(name):
            masked.append(name)  # the capture session's value; the server's may differ
    if masked:
        _from_files(conn, found, masked, contexts)
    _from_roles(conn, found, database_oid, roles, contexts)
    return found


def _keep(
    found: ProductionSettings,
    name: str,
    value: str,
    origin: str,
    context: str,
    moved: bool = True,
) -> None:
    """A carried setting is kept even at its default (the replay target's default may be
    another: effective_io_concurrency 1 on 17, 16 on 18); one not carried is named when it
    is not the build's default (`moved`)."""
    if context in SESSION_CONTEXTS and carried_setting(name):
        found.values[name] = value
        found.origins[name] = origin
    elif origin == "server" and moved:
        found.not_carried[name] = value


def _from_files(
    conn: psycopg.Connection[Any],
    found: ProductionSettings,
    names: list[str],
    contexts: Mapping[str, str],
) -> None:
    try:
        with conn.transaction():
            rows = conn.execute(FILE_SETTINGS_SQL, [names]).fetchall()
    except psycopg.Error:
        found.notes.append(
            f"the server's value of {', '.join(names)} is hidden behind the capture role's own "
            "(pg_file_settings needs pg_read_all_settings)"
        )
        return
    for name, value in rows:
        _keep(found, str(name), str(value), "server", contexts.get(str(name), ""))


def _from_roles(
    conn: psycopg.Connection[Any],
    found: ProductionSettings,
    database_oid: int,
    roles: Sequence[str],
    contexts: Mapping[str, str],
) -> None:
    """Database level over the server; then each role's (in this database over elsewhere)."""
    rows = conn.execute(ROLE_SETTINGS_SQL, [database_oid, list(roles)]).fetchall()
    per_role: dict[str, dict[str, str]] = {role: {} for role in roles}
    for level in ((True, True), (False, False), (False, True)):  # database, role, role in db
        for role, any_role, in_database, config in rows:
            if (any_role, in_database) != level:
                continue
            for name, value in _pairs(config):
                if not carried_setting(name):
                    continue
                if any_role:
                    _keep(found, name, value, "database", contexts.get(name, "user"))
                else:
                    per_role[str(role)][name] = value
    if not roles:
        return
    top = roles[0]  # the role with the most production time: its sessions' values
    for name in sorted({name for values in per_role.values() for name in values}):
        effective = {r: per_role[r].get(name, found.values.get(name, "default")) for r in roles}
        if len(set(effective.values())) > 1:
            shown = ", ".join(f"{r} {v}" for r, v in effective.items())
            found.notes.append(f"roles disagree on {name} ({shown}): {top}'s is carried")
        if name in per_role[top]:
            _keep(found, name, per_role[top][name], f"role {top}", contexts.get(name, "user"))


def _pairs(config: Sequence[str] | None) -> list[tuple[str, str]]:
    pairs = []
    for item in config or ():
        name, sep, value = str(item).partition("=")
        if sep:
            pairs.append((name, value))
    return pairs
