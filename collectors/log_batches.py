"""Parsing a batch of raw auto_explain entries into store rows: in the ingest process, or in
worker processes (a pure function of the entries, so `planshift ingest` can spread the
JSON parsing of a large log over the machine's cores while one process writes the store)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from collectors.log_formats import Problem, RawEntry
from collectors.log_plans import EntryError, LoggedPlan, QueryKeys, read_entry
from collectors.log_rows import FAST_PATH, ShapeCache, ShapeError, observation_row
from detector.errors import PlanshiftError
from detector.model import Observation
from detector.store import LogEntryInfo, NewPlan, observation_rows, utc_now


@dataclass
class ParsedBatch:
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    shapes: dict[str, NewPlan] = field(default_factory=dict)
    infos: list[LogEntryInfo] = field(default_factory=list)
    queries: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # key -> sql, id
    problems: list[Problem] = field(default_factory=list)


class BatchParser:
    """Rows of one log target; caches query identities and plan shapes across batches."""

    def __init__(self, run_id: int, target_id: int) -> None:
        self.run_id = run_id
        self.target_id = target_id
        self.keys = QueryKeys()
        self.shapes = ShapeCache({})
        self.last_time: datetime | None = None
        self.seen_queries: set[str] = set()

    def parse(self, entries: list[RawEntry]) -> ParsedBatch:
        parsed = ParsedBatch()
        for entry in entries:
            try:
                logged = read_entry(entry)
                identity = self.keys.identify(logged.query_text, logged.queryid)
                when = entry.time or self.last_time or utc_now()
                params = logged.params or json.dumps(list(identity.literals))
                row, shape = self._row(logged, identity.key, params, when)
            except (EntryError, ShapeError) as exc:
                kind = exc.kind if isinstance(exc, EntryError) else "bad-plan"
                parsed.problems.append(Problem(entry.line, kind, str(exc)))
                continue
            self.last_time = when
            if identity.key not in self.seen_queries:
                self.seen_queries.add(identity.key)
                parsed.queries[identity.key] = (identity.sql, logged.queryid)
            if shape is not None:
                parsed.shapes.setdefault(shape.fingerprint, shape)
            parsed.rows.append(row)
            parsed.infos.append(
                LogEntryInfo(
                    entry.line,
                    entry.offset,
                    entry.pid,
                    entry.database,
                    entry.user,
                    logged.queryid,
                    logged.plan_format,
                    logged.analyzed,
                )
            )
        return parsed

    def _row(
        self, logged: LoggedPlan, key: str, params: str, when: datetime
    ) -> tuple[tuple[Any, ...], NewPlan | None]:
        """The observations row, and the plan shape when this parser sees it first."""
        if FAST_PATH:
            found, shape, heap = self.shapes.lookup(logged.document, logged.plan_json, when)
            row = observation_row(
                logged.document,
                run_id=self.run_id,
                target_id=self.target_id,
                query_key=key,
                params=params,
                fingerprint_=found,
                heap=heap,
                duration_ms=logged.duration_ms,
                collected_at=when,
            )
            return row, shape
        try:  # the store's columns changed: go through the model (slower, always right)
            plan = logged.plan()
        except PlanshiftError as exc:
            raise ShapeError(str(exc)) from None
        observation = Observation(
            target_id=self.target_id,
            query_key=key,
            params=params,
            plan=plan,
            plan_json=logged.plan_json(),
            duration_ms=plan.execution_ms if plan.execution_ms is not None else logged.duration_ms,
            planning_ms=plan.planning_ms,
            client_ms=None,
            sample_index=0,
            collected_at=when,
            source="log",
        )
        rows, shapes = observation_rows([observation], {self.target_id: self.run_id})
        return rows[0], next(iter(shapes.values()))


_WORKER: BatchParser | None = None


def parse_in_worker(run_id: int, target_id: int, entries: list[RawEntry]) -> ParsedBatch:
    """Entry point of a worker process: one BatchParser per process, kept between batches."""
    global _WORKER
    if _WORKER is None or (_WORKER.run_id, _WORKER.target_id) != (run_id, target_id):
        _WORKER = BatchParser(run_id, target_id)
    return _WORKER.parse(entries)
