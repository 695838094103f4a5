"""Store methods beyond plans and observations: pg_stat_statements snapshots, comparisons, findings.

A mixin of `detector.store.Store` (which owns the DuckDB connection; this module does not
import duckdb).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from detector.errors import PlanshiftError
from detector.model import Finding, Severity
from detector.model.records import (
    PGSS_COLUMNS,
    PgssEntry,
    PgssSnapshotRow,
    from_utc_naive,
    to_utc_naive,
    utc_now,
)
from detector.model.rows import to_json
from detector.store.core import StoreBase

_FINDING_COLUMNS = ("comparison_id", "position", *Finding.__dataclass_fields__)


class StoreResultsMixin(StoreBase):
    def _require_target(self, target_id: int) -> None:
        rows = self._con.execute(
            "SELECT 1 FROM targets WHERE target_id = ?", [target_id]
        ).fetchall()
        if not rows:
            raise PlanshiftError(f"no target with id {target_id} in the store")

    # -- pg_stat_statements ----------------------------------------------------------------

    def add_pgss_snapshot(
        self, target_id: int, entries: Sequence[PgssEntry], *, taken_at: datetime | None = None
    ) -> int:
        """Store one read of pg_stat_statements (raw cumulative counters); returns snapshot_id."""
        moment = to_utc_naive(taken_at) if taken_at is not None else utc_now()
        with self.transaction():
            self._require_target(target_id)
            row = self._con.execute("SELECT nextval('pgss_snapshot_id_seq')").fetchone()
            snapshot_id = int(row[0])
            rows = [
                (snapshot_id, target_id, moment, *(getattr(entry, name) for name in PGSS_COLUMNS))
                for entry in entries
            ]
            names = ("snapshot_id", "target_id", "taken_at", *PGSS_COLUMNS)
            self._insert_rows("pgss_snapshots", names, rows)
        return snapshot_id

    def pgss_snapshots(self, target_ids: Sequence[int]) -> list[PgssSnapshotRow]:
        """Snapshot rows of these targets, ordered by target, time, queryid."""
        rows = self._con.execute(
            f"SELECT snapshot_id, target_id, taken_at, {', '.join(PGSS_COLUMNS)} "
            "FROM pgss_snapshots WHERE target_id IN (SELECT unnest($1::BIGINT[])) "
            "ORDER BY target_id, taken_at, snapshot_id, queryid, userid, dbid, toplevel",
            [list(target_ids)],
        ).fetchall()
        return [
            PgssSnapshotRow(row[0], row[1], from_utc_naive(row[2]), _pgss_entry(row[3:]))
            for row in rows
        ]

    # -- comparisons and findings ----------------------------------------------------------

    def add_comparison(self, baseline: str, candidate: str, run_ids: Sequence[int]) -> int:
        row = self._con.execute(
            "INSERT INTO comparisons (created_at, baseline, candidate, run_ids) "
            "VALUES (?, ?, ?, ?) RETURNING comparison_id",
            [utc_now(), baseline, candidate, json.dumps(sorted(run_ids))],
        ).fetchone()
        return int(row[0])

    def add_findings(self, comparison_id: int, findings: Sequence[Finding]) -> None:
        """Append findings in the order given (position continues after existing ones)."""
        with self.transaction():
            row = self._con.execute(
                "SELECT count(*) FROM comparisons WHERE comparison_id = ?", [comparison_id]
            ).fetchone()
            if not row[0]:
                raise PlanshiftError(f"no comparison with id {comparison_id} in the store")
            row = self._con.execute(
                "SELECT coalesce(max(position) + 1, 0) FROM findings WHERE comparison_id = ?",
                [comparison_id],
            ).fetchone()
            start = int(row[0])
            rows = [
                (comparison_id, start + index, *_finding_values(finding))
                for index, finding in enumerate(findings)
            ]
            self._insert_rows("findings", _FINDING_COLUMNS, rows)

    def findings(self, comparison_id: int) -> list[Finding]:
        rows = self._con.execute(
            "SELECT code, name, severity, query_key, query_name, message, evidence, point "
            "FROM findings WHERE comparison_id = ? ORDER BY position",
            [comparison_id],
        ).fetchall()
        return [
            Finding(
                code,
                name,
                Severity(severity),
                key,
                query_name,
                message,
                json.loads(evidence),
                point,
            )
            for code, name, severity, key, query_name, message, evidence, point in rows
        ]


def _pgss_entry(values: Sequence[Any]) -> PgssEntry:
    return PgssEntry(**dict(zip(PGSS_COLUMNS, values, strict=True)))


def _finding_values(finding: Finding) -> tuple[Any, ...]:
    """Values in Finding field order (code, name, severity, query_key, query_name, ...)."""
    severity = Severity(finding.severity).value
    evidence = to_json(dict(finding.evidence))
    head = (finding.code, finding.name, severity, finding.query_key, finding.query_name)
    return (*head, finding.message, evidence, finding.point)
