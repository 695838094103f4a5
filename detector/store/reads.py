"""Reading the store: runs, targets, queries, observations and plans, as frozen records.

A mixin of `detector.store.Store`, which owns the DuckDB connection (this module does not
import duckdb). Each method is one query; `observations` fetches all rows at once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from detector.errors import PlanshiftError
from detector.model import Plan, parse_plan
from detector.model.records import (
    OBSERVATION_COLUMNS,
    ObservationRow,
    PlanRecord,
    QueryRecord,
    RunRecord,
    TargetRecord,
    from_utc_naive,
)
from detector.store.core import StoreBase

_RUN_COLUMNS = "run_id, label, started_at, finished_at, status, tool_version, workload_hash, host"
_TARGET_COLUMNS = "target_id, run_id, name, source, server_version_num, gucs, info"
_PLAN_COLUMNS = "fingerprint, signature, shape, plan_json, first_seen"


class StoreReadsMixin(StoreBase):
    def runs(self) -> list[RunRecord]:
        """All runs, oldest first."""
        columns = self._types_of("runs")
        note = "status_note" if "status_note" in columns else "NULL"
        kind = "kind" if "kind" in columns else "'run'"
        rows = self._con.execute(
            f"SELECT {_RUN_COLUMNS}, {note}, {kind} FROM runs ORDER BY run_id"
        ).fetchall()
        return [_run_record(row) for row in rows]

    def latest_run_id(self) -> int | None:
        """The most recent complete run."""
        row = self._con.execute(
            "SELECT run_id FROM runs WHERE status = 'complete' "
            "ORDER BY started_at DESC, run_id DESC LIMIT 1"
        ).fetchone()
        return int(row[0]) if row else None

    def latest_log_time(self, target_ids: Sequence[int] | None = None) -> datetime | None:
        """When the last logged execution (of these log targets) ran, in UTC: what a time of
        day alone refers to, and where a log's new entries start."""
        row = self._con.execute(
            "SELECT max(collected_at) FROM observations WHERE source = 'log' "
            "AND ($1 IS NULL OR list_contains($1, target_id))",
            [None if target_ids is None else list(target_ids)],
        ).fetchone()
        return row[0].replace(tzinfo=UTC) if row and row[0] is not None else None

    def run_or_latest(self, run_id: int | None) -> int:
        """`run_id`, or the most recent complete run; an error when the store has none."""
        if run_id is not None:
            return run_id
        latest = self.latest_run_id()
        if latest is None:
            raise PlanshiftError(
                f"no complete run in {self.path}", "run `planshift run WORKLOAD.toml` first"
            )
        return latest

    def targets(self, run_ids: Sequence[int] | None = None) -> list[TargetRecord]:
        """Targets of these runs (all runs when None), in creation order."""
        sql = f"SELECT {_TARGET_COLUMNS} FROM targets"
        parameters: list[Any] = []
        if run_ids is not None:
            sql += " WHERE run_id IN (SELECT unnest($1::BIGINT[]))"
            parameters.append(list(run_ids))
        rows = self._con.execute(sql + " ORDER BY target_id", parameters).fetchall()
        return [
            TargetRecord(tid, rid, name, source, version, json.loads(gucs), json.loads(info))
            for tid, rid, name, source, version, gucs, info in rows
        ]

    def queries(self) -> dict[str, QueryRecord]:
        rows = self._con.execute(
            "SELECT query_key, name, sql, queryid FROM queries ORDER BY query_key"
        ).fetchall()
        return {row[0]: QueryRecord(*row) for row in rows}

    def observations(self, target_ids: Sequence[int]) -> list[ObservationRow]:
        """Rows of these targets, ordered by target, query, point, sample_index (one query)."""
        rows = self._con.execute(
            f"SELECT {', '.join(OBSERVATION_COLUMNS)} FROM observations "
            "WHERE target_id IN (SELECT unnest($1::BIGINT[])) "
            "ORDER BY target_id, query_key, point NULLS FIRST, sample_index, observation_id",
            [list(target_ids)],
        ).fetchall()
        return [_observation_row(row) for row in rows]

    def shape_counts(
        self, target_ids: Sequence[int]
    ) -> list[tuple[int, str, str | None, str, int]]:
        """(target_id, query_key, point, plan signature, executions): the plan-shape census
        counted by DuckDB, so its memory does not grow with the observations (5 M included)."""
        rows = self._con.execute(
            "SELECT o.target_id, o.query_key, o.point, p.signature, o.fingerprint, count(*) "
            "FROM observations o LEFT JOIN plans p USING (fingerprint) "
            "WHERE o.target_id IN (SELECT unnest($1::BIGINT[])) GROUP BY ALL ORDER BY ALL",
            [list(target_ids)],
        ).fetchall()
        for row in rows:
            if row[3] is None:
                self.plan_record(row[4])  # the error of a plan the store lacks
        return [(target, key, point, sign, int(n)) for target, key, point, sign, _, n in rows]

    def plan_record(self, fingerprint: str) -> PlanRecord:
        row = self._con.execute(
            f"SELECT {_PLAN_COLUMNS} FROM plans WHERE fingerprint = ?", [fingerprint]
        ).fetchone()
        if row is None:
            raise PlanshiftError(
                f"no plan with fingerprint {fingerprint} in the store",
                "fingerprints are listed in the plans table and in reports",
            )
        return PlanRecord(row[0], row[1], row[2], row[3], from_utc_naive(row[4]))

    def plan(self, fingerprint: str) -> Plan:
        """The stored EXPLAIN JSON of this shape (the first one seen), parsed."""
        return parse_plan(self.plan_record(fingerprint).plan_json)


def _run_record(row: tuple[Any, ...]) -> RunRecord:
    run_id, label, started, finished, status, tool_version, workload_hash, host, note, kind = row
    started_at = from_utc_naive(started)
    finished_at = from_utc_naive(finished) if finished is not None else None
    return RunRecord(
        run_id, label, started_at, finished_at, status, tool_version, workload_hash, host, note,
        kind,
    )  # fmt: skip


def _observation_row(row: tuple[Any, ...]) -> ObservationRow:
    """Build the record without the frozen __init__ (26 object.__setattr__ calls): twice as fast
    for the 100k-row reads of a comparison. Same object as ObservationRow(*row) would make."""
    record: ObservationRow = object.__new__(ObservationRow)
    values = record.__dict__
    values.update(zip(OBSERVATION_COLUMNS, row, strict=True))
    values["collected_at"] = row[-1].replace(tzinfo=UTC)
    return record
