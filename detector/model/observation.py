"""One execution of one query on one target: what collectors produce and the store keeps."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from detector.model.fingerprint import fingerprint
from detector.model.plan import Plan


@dataclass(frozen=True)
class Observation:
    target_id: int
    query_key: str
    params: str  # JSON text of the parameter values (a list or an object)
    plan: Plan
    plan_json: str  # EXPLAIN output as PostgreSQL returned it (stored once per fingerprint)
    duration_ms: float | None  # server execution time, or the log line's duration
    planning_ms: float | None
    client_ms: float | None  # wall time around the statement, as the client saw it
    sample_index: int
    collected_at: datetime
    point: str | None = None  # sweep point label, e.g. "N=8000"
    source: str = "explain"  # explain | log

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.plan)
