"""A workload's [settings] on one server: which it takes, under which name, and why not the rest.

A captured workload carries production's settings, and the replay targets are other versions:
a setting may have been renamed (`force_parallel_mode` is `debug_parallel_query` from 16 on),
not exist yet or any more, or refuse the value or the role. Each is tried with
`set_config(name, value, true)` in a transaction that is rolled back, as the runner will set
it; what fails is left out on that server with PostgreSQL's reason, and recorded per target so
the reports say that this side does not run production's settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg

from detector.model.settings import renamed_setting


@dataclass(frozen=True)
class ServerSettings:
    applied: dict[str, str] = field(default_factory=dict)  # name on this server -> value
    not_applied: dict[str, str] = field(default_factory=dict)  # workload name -> why not

    def as_info(self) -> dict[str, Any]:
        return {"applied": dict(self.applied), "not_applied": dict(self.not_applied)}


def server_settings(conn: psycopg.Connection[Any], wanted: Mapping[str, str]) -> ServerSettings:
    """The workload's settings this server takes, each checked by setting it."""
    if not wanted:
        return ServerSettings()
    known = {
        str(name)
        for (name,) in conn.execute(
            "SELECT name FROM pg_settings WHERE name = ANY(%s::text[])",
            [[*wanted, *(renamed_setting(n) for n in wanted)]],
        ).fetchall()
    }
    version = conn.info.server_version // 10000
    found = ServerSettings()
    for name, value in wanted.items():
        here = name if name in known or "." in name else renamed_setting(name)
        if here not in known and "." not in here:
            found.not_applied[name] = f"PostgreSQL {version} has no setting {name}"
            continue
        error = _try(conn, here, value)
        if error is None:
            found.applied[here] = value
        else:
            found.not_applied[name] = error
    return found


def _try(conn: psycopg.Connection[Any], name: str, value: str) -> str | None:
    try:
        with conn.transaction(force_rollback=True):
            conn.execute("SELECT set_config(%s, %s, true)", [name, value])
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0]
    return None
