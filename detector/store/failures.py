"""Store methods for failed executions of workload queries (table query_failures, schema 9).

A mixin of `detector.store.Store` (which owns the DuckDB connection; this module does not
import duckdb).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from detector.errors import PlanshiftError
from detector.model.failures import PHASES, QueryFailure
from detector.model.records import from_utc_naive, to_utc_naive
from detector.model.rows import find_password
from detector.store.core import StoreBase

_COLUMNS = (
    "target_id",
    "query_key",
    "point",
    "sample_index",
    "phase",
    "params",
    "sqlstate",
    "message",
    "detail",
    "hint",
    "failed_at",
)


class StoreFailuresMixin(StoreBase):
    def add_query_failures(self, failures: Sequence[QueryFailure]) -> int:
        """Store failed executions (one transaction); returns the count."""
        if not failures:
            return 0
        for failure in failures:
            if failure.phase not in PHASES:
                raise PlanshiftError(f"unknown failure phase {failure.phase!r}")
            texts = [failure.message, failure.detail, failure.hint, failure.params]
            if find_password(texts, "query_failures") is not None:
                raise PlanshiftError(
                    "refusing to store a password (found in an error message of a failed query)",
                    "this is a bug in planshift's redaction: please report it",
                )
        with self.transaction():
            targets = sorted({failure.target_id for failure in failures})
            runs = dict(
                self._con.execute(
                    "SELECT target_id, run_id FROM targets "
                    "WHERE target_id IN (SELECT unnest($1::BIGINT[]))",
                    [targets],
                ).fetchall()
            )
            missing = [t for t in targets if t not in runs]
            if missing:
                raise PlanshiftError(f"no target with id {missing[0]} in the store")
            rows = [(runs[failure.target_id], *_values(failure)) for failure in failures]
            self._insert_rows("query_failures", ("run_id", *_COLUMNS), rows)
        return len(failures)

    def query_failures(self, target_ids: Sequence[int] | None = None) -> list[QueryFailure]:
        """Failed executions of these targets (all when None), in the order they happened."""
        sql = f"SELECT {', '.join(_COLUMNS)} FROM query_failures"
        parameters: list[Any] = []
        if target_ids is not None:
            sql += " WHERE target_id IN (SELECT unnest($1::BIGINT[]))"
            parameters.append(list(target_ids))
        rows = self._con.execute(sql + " ORDER BY failure_id", parameters).fetchall()
        return [_failure(row) for row in rows]

    def failed_queries(self) -> dict[int, list[tuple[str, str | None, list[str]]]]:
        """Per run: each query (name, sweep point) with a failed execution, and the names of the
        targets it failed on; by name and point."""
        rows = self._con.execute(
            "SELECT f.run_id, coalesce(q.name, f.query_key), f.point, "
            "list(DISTINCT t.name ORDER BY t.name) FROM query_failures f "
            "JOIN targets t USING (target_id) LEFT JOIN queries q USING (query_key) "
            "GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        found: dict[int, list[tuple[str, str | None, list[str]]]] = {}
        for run_id, name, point, targets in rows:
            found.setdefault(int(run_id), []).append((str(name), point, list(targets)))
        return found


def _values(failure: QueryFailure) -> tuple[Any, ...]:
    values = [getattr(failure, name) for name in _COLUMNS]
    values[-1] = to_utc_naive(failure.failed_at)
    return tuple(values)


def _failure(row: tuple[Any, ...]) -> QueryFailure:
    values = dict(zip(_COLUMNS, row, strict=True))
    values["failed_at"] = from_utc_naive(values["failed_at"])
    values["params"] = str(values["params"])
    return QueryFailure(**values)
