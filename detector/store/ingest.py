"""Store methods for log ingest and pg_stat_statements metadata (a mixin of `detector.store.Store`).

`add_log_batch` writes one batch of log observations, their `log_entries`, the problems met
and the ledger row of the file in ONE transaction: an ingest killed between two batches leaves
the store as it was after the last one, and the ledger says where to resume.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from detector.model.log_rows import (
    ColumnKind,
    LedgerUpdate,
    LogBatchColumns,
    LogEventRow,
    LogFileRecord,
    LogObservationRow,
)
from detector.model.records import (
    OBSERVATION_COLUMNS,
    from_utc_naive,
    to_utc_naive,
    utc_now,
)
from detector.model.rows import PLAN_COLUMNS, PLAN_NODE_COLUMNS, NewPlan
from detector.store.compat import REGISTER_NUMPY, insert_columns
from detector.store.core import StoreBase
from detector.store.reads import _observation_row

_LEDGER_COLUMNS = (
    "file_id, path, format, compressed, head_len, head_sha256, resume_offset, resume_line, "
    "high_offset, pending_starts, entries, plans, problems"
)


_KINDS: dict[str, ColumnKind] = {
    "BIGINT": "integer",
    "INTEGER": "integer",
    "DOUBLE": "float",
    "TIMESTAMP": "timestamp",
}


class StoreIngestMixin(StoreBase):
    # -- the ledger ------------------------------------------------------------------------

    def log_files(self) -> list[LogFileRecord]:
        rows = self._con.execute(
            f"SELECT {_LEDGER_COLUMNS} FROM log_files ORDER BY file_id"
        ).fetchall()
        records = []
        for row in rows:
            values: list[Any] = list(row)
            values[9] = tuple(json.loads(row[9]))
            records.append(LogFileRecord(*values))
        return records

    def add_log_file(
        self, path: str, *, log_format: str, compressed: bool, head_len: int, head_sha256: str
    ) -> int:
        now = utc_now()
        row = self._con.execute(
            "INSERT INTO log_files (path, format, compressed, head_len, head_sha256, "
            "resume_offset, resume_line, high_offset, pending_starts, entries, plans, problems, "
            "first_ingested_at, last_ingested_at) VALUES (?, ?, ?, ?, ?, 0, 1, 0, '[]', 0, 0, 0, "
            "?, ?) RETURNING file_id",
            [path, log_format, compressed, head_len, head_sha256, now, now],
        ).fetchone()
        return int(row[0])

    def logged_executions(
        self, since: datetime, until: datetime, target_ids: Sequence[int]
    ) -> list[tuple[Any, ...]]:
        """Log observations of these targets in [since, until] as the duplicate check compares
        them: time, pid, query, parameters, fingerprint, duration, cost, shared hit and read
        blocks; then the line and file they were read from."""
        rows: list[tuple[Any, ...]] = self._con.execute(
            "SELECT o.collected_at, e.pid, o.query_key, o.params, o.fingerprint, o.duration_ms, "
            "o.total_cost, o.shared_hit, o.shared_read, e.line, f.path "
            "FROM observations o JOIN log_entries e USING (observation_id) "
            "JOIN log_files f USING (file_id) WHERE o.collected_at BETWEEN ? AND ? "
            "AND list_contains(?, o.target_id)",
            [_naive(since), _naive(until), list(target_ids)],
        ).fetchall()
        return rows

    def logged_events(self, since: datetime, until: datetime) -> list[tuple[Any, ...]]:
        """Server events in [since, until]: time, pid, kind, subject, value, message, and
        the log file's id."""
        rows: list[tuple[Any, ...]] = self._con.execute(
            "SELECT logged_at, pid, kind, subject, value, message, file_id FROM log_events "
            "WHERE logged_at BETWEEN ? AND ?",
            [_naive(since), _naive(until)],
        ).fetchall()
        return rows

    def log_file_ids(self, target_ids: Sequence[int], paths: Sequence[str]) -> set[int]:
        """The log files these targets' observations came from, and those last read at these
        paths."""
        rows = self._con.execute(
            "SELECT DISTINCT e.file_id FROM log_entries e JOIN observations o "
            "USING (observation_id) WHERE list_contains(?, o.target_id) "
            "UNION SELECT file_id FROM log_files WHERE list_contains(?, path)",
            [list(target_ids), list(paths)],
        ).fetchall()
        return {int(row[0]) for row in rows}

    def forget_log_file(self, file_id: int) -> None:
        """Remove a ledger row that has no observations or events, and its problems: a file
        read in the wrong format, to be read anew."""
        with self.transaction():
            for table in ("log_entries", "log_events"):
                used = self._con.execute(
                    f"SELECT count(*) FROM {table} WHERE file_id = ?", [file_id]
                ).fetchone()
                if used and used[0]:
                    raise ValueError(f"log file {file_id} has rows in {table}")
            self._con.execute("DELETE FROM log_problems WHERE file_id = ?", [file_id])
            self._con.execute("DELETE FROM log_files WHERE file_id = ?", [file_id])

    def log_column_kinds(self) -> dict[str, ColumnKind]:
        """What each column of observations and log_entries holds, for log_batch_columns."""
        types = {**self._types_of("observations"), **self._types_of("log_entries")}
        return {name: _KINDS.get(data_type, "other") for name, data_type in types.items()}

    def add_log_batch(
        self,
        file_id: int,
        columns: LogBatchColumns,
        shapes: Sequence[NewPlan],  # plan shapes first seen in this batch
        queries: Mapping[str, tuple[str, str, int | None]],  # key -> (name, sql, queryid)
        problems: Sequence[tuple[int, str, str]],  # (line, kind, message)
        ledger: LedgerUpdate,
        unlabel: Sequence[int] = (),  # queryids found to belong to no single text
        events: Sequence[Sequence[Any]] = (),  # (line, byte_offset, time, pid, ...): LogEventRow
    ) -> None:
        """Observations, their log_entries, new queries and plans, problems and the ledger
        row: all in one transaction, or nothing."""
        with self.transaction():
            if queries:
                names = list(zip(*queries.values(), strict=True))
                self._con.execute(
                    "INSERT INTO queries SELECT unnest($1::VARCHAR[]), unnest($2::VARCHAR[]), "
                    "unnest($3::VARCHAR[]), unnest($4::BIGINT[]) ON CONFLICT (query_key) "
                    "DO UPDATE SET queryid = coalesce(queries.queryid, excluded.queryid)",
                    [list(queries), *(list(column) for column in names)],
                )
            if shapes:
                known = {
                    row[0]
                    for row in self._con.execute(
                        "SELECT fingerprint FROM plans WHERE fingerprint IN (SELECT unnest($1))",
                        [[shape.fingerprint for shape in shapes]],
                    ).fetchall()
                }
                new = [shape for shape in shapes if shape.fingerprint not in known]
                self._insert_rows("plans", PLAN_COLUMNS, [shape.plan_row for shape in new])
                nodes = [node for shape in new for node in shape.nodes]
                self._insert_rows("plan_nodes", PLAN_NODE_COLUMNS, nodes)
            if columns.size:
                ids = self._next_observation_ids(columns.size)
                self._insert_columns(
                    "observations", {"observation_id": ids, **columns.observations}
                )
                file_ids = np.full(columns.size, file_id, dtype=np.int64)
                self._insert_columns(
                    "log_entries", {"observation_id": ids, "file_id": file_ids, **columns.entries}
                )
            if problems:
                now = utc_now()
                self._insert_rows(
                    "log_problems",
                    ("file_id", "line", "kind", "message", "recorded_at"),
                    [(file_id, line, kind, message, now) for line, kind, message in problems],
                )
            if unlabel:
                self._unlabel(list(unlabel))
            if events:
                self._add_log_events(file_id, events)
            self._con.execute(
                "UPDATE log_files SET path = ?, head_len = ?, head_sha256 = ?, resume_offset = ?, "
                "resume_line = ?, high_offset = ?, pending_starts = ?, entries = entries + ?, "
                "plans = plans + ?, problems = problems + ?, last_ingested_at = ? WHERE file_id = ?",
                [
                    ledger.path,
                    ledger.head_len,
                    ledger.head_sha256,
                    ledger.resume_offset,
                    ledger.resume_line,
                    ledger.high_offset,
                    json.dumps(list(ledger.pending_starts)),
                    ledger.entries,
                    ledger.plans,
                    ledger.problems,
                    utc_now(),
                    file_id,
                ],
            )

    def _add_log_events(self, file_id: int, events: Sequence[Sequence[Any]]) -> None:
        stored = {
            row[0]
            for row in self._con.execute(
                "SELECT byte_offset FROM log_events WHERE file_id = $1 AND "
                "list_contains($2, byte_offset)",
                [file_id, [event[1] for event in events]],
            ).fetchall()
        }
        rows = [
            (file_id, *event[:2], _naive(event[2]), *event[3:9])
            for event in events
            if event[1] not in stored
        ]
        names = ("file_id", "line", "byte_offset", "logged_at", "pid", "database", "kind")
        self._insert_rows("log_events", (*names, "subject", "value", "message"), rows)

    def _next_observation_ids(self, count: int) -> Any:
        ids = self._con.execute(
            "SELECT nextval('observation_id_seq') AS id FROM range(?)", [count]
        ).fetchnumpy()["id"]
        return np.asarray(ids, dtype=np.int64)

    def _insert_columns(self, table: str, columns: Mapping[str, Any]) -> None:
        """INSERT numpy columns (`log_batch_columns`): ~5x faster than _insert_rows."""
        if not REGISTER_NUMPY:
            insert_columns(self._con, table, columns)
            return
        view = f"_planshift_{table}_batch"
        self._con.register(view, dict(columns))
        try:
            listed = ", ".join(columns)
            self._con.execute(f"INSERT INTO {table} ({listed}) SELECT {listed} FROM {view}")
        finally:
            self._con.unregister(view)

    def drop_ambiguous_queryids(self) -> int:
        """Unset queryid labels of log entries (and queries) where one queryid was logged with
        two query texts (a nested statement's record carries its caller's id); how many ids."""
        with self.transaction():
            ids = [
                int(row[0])
                for row in self._con.execute(
                    "SELECT e.queryid FROM log_entries e JOIN observations o "
                    "USING (observation_id) WHERE e.queryid IS NOT NULL GROUP BY e.queryid "
                    "HAVING count(DISTINCT o.query_key) > 1"
                ).fetchall()
            ]
            if ids:
                self._unlabel(ids)
        return len(ids)

    def _unlabel(self, ids: list[int]) -> None:
        self._con.execute(
            "UPDATE log_entries SET queryid = NULL WHERE list_contains($1, queryid)", [ids]
        )
        self._con.execute(
            "UPDATE queries SET queryid = NULL WHERE list_contains($1, queryid)", [ids]
        )

    def log_problems(self, file_id: int | None = None) -> list[tuple[str, int, str, str]]:
        """(path, line, kind, message) of broken input, by file and line."""
        rows = self._con.execute(
            "SELECT f.path, p.line, p.kind, p.message FROM log_problems p JOIN log_files f "
            "USING (file_id) WHERE $1 IS NULL OR file_id = $1 ORDER BY f.file_id, p.line",
            [file_id],
        ).fetchall()
        return [(str(a), int(b), str(c), str(d)) for a, b, c, d in rows]

    def log_events(
        self, since: datetime | None = None, until: datetime | None = None
    ) -> list[LogEventRow]:
        """Events of the ingested logs in [since, until) (those without a time too), by time."""
        rows = self._con.execute(
            "SELECT e.line, e.byte_offset, e.logged_at, e.pid, e.database, e.kind, e.subject, "
            "e.value, e.message, f.path FROM log_events e JOIN log_files f USING (file_id) "
            "WHERE ($1 IS NULL OR e.logged_at >= $1) AND ($2 IS NULL OR e.logged_at < $2) "
            "ORDER BY e.logged_at NULLS FIRST, e.file_id, e.byte_offset",
            [_naive(since), _naive(until)],
        ).fetchall()
        return [
            LogEventRow(
                line,
                offset,
                from_utc_naive(at) if at else None,
                pid,
                db,
                kind,
                subject,
                value,
                message,
                path,
            )
            for line, offset, at, pid, db, kind, subject, value, message, path in rows
        ]

    def interrupted_runs(self, kind: str) -> list[int]:
        """Runs of `kind` still 'running': with the store open for writing, nobody else is
        writing them."""
        rows = self._con.execute(
            "SELECT run_id FROM runs WHERE status = 'running' AND kind = ? ORDER BY run_id",
            [kind],
        ).fetchall()
        return [int(row[0]) for row in rows]

    # -- reading log observations by time -------------------------------------------------

    def log_observations(
        self,
        since: datetime | None = None,
        until: datetime | None = None,
        query_key: str | None = None,
        source: str | None = None,
    ) -> list[LogObservationRow]:
        """Observations of log targets in [since, until), in time order, with pid and queryid."""
        columns = ", ".join(f"o.{c}" for c in OBSERVATION_COLUMNS)
        rows = self._con.execute(
            f"SELECT {columns}, t.name, e.pid, e.database, e.queryid, e.settings, e.line, f.path, "
            "e.generic "
            "FROM observations o JOIN targets t USING (target_id) "
            "LEFT JOIN log_entries e USING (observation_id) LEFT JOIN log_files f USING (file_id) "
            "WHERE t.source = 'log' AND ($1 IS NULL OR o.collected_at >= $1) "
            "AND ($2 IS NULL OR o.collected_at < $2) AND ($3 IS NULL OR o.query_key = $3) "
            "AND ($4 IS NULL OR t.name = $4) ORDER BY o.collected_at, o.observation_id",
            [_naive(since), _naive(until), query_key, source],
        ).fetchall()
        width = len(OBSERVATION_COLUMNS)
        return [LogObservationRow(_observation_row(row[:width]), *row[width:]) for row in rows]

    # -- pg_stat_statements_info -----------------------------------------------------------

    def add_pgss_info(self, snapshot_id: int, dealloc: int | None, stats_reset: Any) -> None:
        self._con.execute(
            "INSERT INTO pgss_info VALUES (?, ?, ?)",
            [snapshot_id, dealloc, _naive(stats_reset)],
        )

    def pgss_info(self) -> dict[int, tuple[int | None, datetime | None]]:
        rows = self._con.execute("SELECT snapshot_id, dealloc, stats_reset FROM pgss_info")
        return {
            int(sid): (dealloc, from_utc_naive(reset) if reset is not None else None)
            for sid, dealloc, reset in rows.fetchall()
        }


def _naive(moment: Any) -> Any:
    return to_utc_naive(moment) if isinstance(moment, datetime) else moment
