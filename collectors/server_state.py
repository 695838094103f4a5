"""What a workload can leave behind on a --dsn server although every execution is rolled back.

A replication slot, a reloaded setting (ALTER SYSTEM + pg_reload_conf() through dblink), a
pending ALTER SYSTEM, ALTER ROLE/DATABASE ... SET, a pg_stat_statements or statistics reset, a
prepared transaction, a session left connected, an advanced sequence: none of them is undone by
ROLLBACK. Around a run on a --dsn server, `ServerWatch` reads them when the run begins and after
each query's first execution (before its measured samples, so the culprit is named before it
pollutes them) and after its last; a change fails the run naming the query, except sequences
(an INSERT into a serial column advances one: a warning, filed in the target's info).

Cost: a check is one prepared statement on a connection of the watch's own: an md5 per probe (the
SQL in collectors/sql/state_*.sql); pg_settings, the dearest probe (2-4 ms), is read only when
pg_conf_load_time() moved, and a probe's rows only when its digest changed. Two checks per query
and server; the figures are in README (Safety).
Blind spots: partial pg_stat_statements resets (only a reset of all entries sets stats_reset),
pg_file_settings without superuser, objects other than the probes (files written by COPY TO
PROGRAM, other databases' statistics).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from collectors.servers.targets import Server
from collectors.session import APPLICATION_NAME, connect
from collectors.sql import load
from detector.errors import PlanshiftError
from detector.model.sink import RunSink

# probe -> (what a change is called, True when it fails the run)
PROBES: dict[str, tuple[str, bool]] = {
    "slots": ("replication slot", True),
    "settings": ("setting", True),
    "file_settings": ("configuration file line", True),
    "role_settings": ("ALTER ROLE/DATABASE ... SET of", True),
    "resets": ("reset of the", True),
    "pgss_reset": ("reset of", True),
    "prepared": ("prepared transaction", True),
    "sessions": ("session", True),
    "sequences": ("sequence", False),
    "reload": ("reload of the", False),
}
UNDO = {
    "slots": "drop a slot with SELECT pg_drop_replication_slot('NAME')",
    "settings": "ALTER SYSTEM RESET the setting and SELECT pg_reload_conf()",
    "file_settings": "ALTER SYSTEM RESET the setting (it applies at the next reload otherwise)",
    "role_settings": "ALTER ROLE/DATABASE ... RESET the setting",
    "prepared": "ROLLBACK PREPARED 'GID'",
    "sessions": "pg_terminate_backend(PID)",
}
Rows = dict[str, str]
WHOLE_RUN = "*"  # the query a warning of the deferred probes is filed under
SEQUENCES_PER_QUERY = 500  # ~6 ms a check: more are read at the end of the run only


@dataclass
class Watched:
    server: Server
    conn: psycopg.Connection[Any]
    probes: tuple[str, ...]
    params: dict[str, Any]
    digests: tuple[Any, ...]
    rows: dict[str, Rows]
    deferred: tuple[str, ...] = ()  # probes read at the end of the run only


@dataclass
class ServerWatch:
    """The state checks of one run, per --dsn server (embedded clusters are the run's own).
    What it checked, and its warnings per query, are in server.info["server_state"]."""

    watched: list[Watched] = field(default_factory=list)
    conns: list[psycopg.Connection[Any]] = field(default_factory=list)  # the watch's own

    def begin(self, servers: Sequence[Server], sessions: Sequence[int]) -> None:
        """Read the state of each --dsn server before the first query (its setup has run), on a
        connection of the watch's own; `sessions`: the run's measuring backends."""
        dsn = [server for server in servers if server.source == "dsn"]
        conns = self.conns
        conns.extend(connect(server) for server in dsn)  # closed by close(), errors included
        ours = [*sessions, *(conn.info.backend_pid for conn in conns)]
        for server, conn in zip(dsn, conns, strict=True):
            conn.cursor_factory = psycopg.Cursor  # server-side binding: prepared once
            version, pgss_info, file_settings, now, sequences = conn.execute(
                load("state_available")
            ).fetchone() or (0, False, False, None, 0)
            skipped = {"pgss_reset"} if not (pgss_info and version >= 140000) else set()
            if not file_settings:
                skipped.add("file_settings")
            # many sequences: read once at the end of the run instead of after every query
            deferred = ("sequences",) if sequences > SEQUENCES_PER_QUERY else ()
            probes = tuple(p for p in PROBES if p not in skipped and p not in deferred)
            params = {"since": now, "application": APPLICATION_NAME, "ours": ours}
            digests = _digests(conn, _digested(probes), params)
            rows = {probe: _rows(conn, probe, params) for probe in (*probes, *deferred)}
            self.watched.append(Watched(server, conn, probes, params, digests, rows, deferred))
            server.info["server_state"] = {
                "checked": list(probes),
                "checked_at_the_end": list(deferred),
                "not_checked": sorted(skipped),
            }

    def close(self) -> None:
        for conn in self.conns:
            conn.close()

    def check(self, query: str, moment: str) -> None:
        """Compare every watched server with its last reading; a change fails the run (a
        PlanshiftError naming `query`), sequences and reloads are warnings."""
        for watched in self.watched:
            digested = _digested(watched.probes)
            digests = _digests(watched.conn, digested, watched.params)
            if digests == watched.digests:
                continue
            changed = [
                p for p, a, b in zip(digested, watched.digests, digests, strict=True) if a != b
            ]
            if "reload" in changed:  # settings change only by a reload: read them then
                changed.insert(0, "settings")
            failures: list[str] = []
            for probe in changed:
                now = _rows(watched.conn, probe, watched.params)
                found = describe(probe, watched.rows[probe], now)
                watched.rows[probe] = now
                if PROBES[probe][1]:
                    failures.extend(found)
                elif not failures:
                    self._warn(watched.server, query, moment, found)
            watched.digests = digests
            if failures:
                raise PlanshiftError(
                    f"query {query} changed server {watched.server.name} outside its "
                    f"rolled-back transaction ({moment}): {'; '.join(failures)}",
                    "planshift rolls back every execution, but these outlive it: remove what "
                    "does it from the workload or run it on a throwaway copy, and undo it ("
                    + "; ".join(UNDO[p] for p in changed if p in UNDO and PROBES[p][1])
                    + ")",
                )

    def _warn(self, server: Server, query: str, moment: str, found: list[str]) -> None:
        warnings = server.info.setdefault("server_state", {}).setdefault("warnings", {})
        warnings.setdefault(query, []).extend(f"{phrase} ({moment})" for phrase in found)

    def finish(self, store: RunSink, sides: Sequence[Any]) -> None:
        """Read the deferred probes (warnings about the whole run), then file the warnings in
        each side's target info (server_state.warnings, per query)."""
        for watched in self.watched:
            for probe in watched.deferred:
                now = _rows(watched.conn, probe, watched.params)
                found = describe(probe, watched.rows[probe], now)
                self._warn(watched.server, WHOLE_RUN, "by the end of the run", found)
        for side in sides:
            warnings = side.server.info.get("server_state", {}).get("warnings")
            if warnings:
                store.file_target_info(side.target_id, "server_state", "warnings", warnings)


def warning_lines(server: Server) -> list[str]:
    """The run's warnings about `server`, one line each, to print after the run."""
    warnings = server.info.get("server_state", {}).get("warnings", {})
    return [
        f"warning: {'the run' if query == WHOLE_RUN else 'query ' + query} on {server.name}: "
        + phrase
        for query, phrases in warnings.items()
        for phrase in phrases
    ]


def _digested(probes: Sequence[str]) -> tuple[str, ...]:
    """The probes read at every check as digests: all but pg_settings (~2-4 ms alone), which
    only a reload changes, so it is read when pg_conf_load_time() moves."""
    return tuple(probe for probe in probes if probe != "settings")


def _digests(
    conn: psycopg.Connection[Any], probes: Sequence[str], params: Mapping[str, Any]
) -> tuple[Any, ...]:
    columns = ", ".join(
        f"(SELECT md5(coalesce(string_agg(p.key || '=' || coalesce(p.value, ''), E'\\n' "
        f"ORDER BY p.key, p.value), '')) FROM ({load('state_' + probe)}) p)"
        for probe in probes
    )
    # prepared: parsing and rewriting the views of this statement costs ~10 ms, executing ~1 ms
    row = conn.execute(f"SELECT {columns}", dict(params), prepare=True).fetchone()
    return tuple(row) if row else ()


def _rows(conn: psycopg.Connection[Any], probe: str, params: Mapping[str, Any]) -> Rows:
    sql = load("state_" + probe)
    cursor = conn.execute(sql, dict(params)) if "%(" in sql else conn.execute(sql)
    return {str(key): str(value) for key, value in cursor.fetchall()}


def describe(probe: str, before: Rows, after: Rows) -> list[str]:
    """One phrase per row that appeared, went or changed."""
    noun = PROBES[probe][0]
    if probe == "sessions":
        return [f"session {pid} ({after[pid]}) is still connected" for pid in sorted(after)]
    phrases = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if old is None:
            phrases.append(f"{noun} {key} appeared: {new}")
        elif new is None:
            phrases.append(f"{noun} {key} went away (was {old})")
        elif probe == "sequences":
            phrases.append(f"sequence {key} advanced ({old} -> {new}; nextval is not rolled back)")
        else:
            phrases.append(f"{noun} {key} changed: {old} -> {new}")
    return phrases
