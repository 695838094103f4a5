"""Records the store returns (frozen dataclasses), one per table row, with UTC-aware times."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

RUN_STATUSES = ("running", "complete", "failed")
RUN_KINDS = ("run", "noise", "ingest", "snapshot")
TARGET_SOURCES = ("embedded", "dsn", "log")
OBSERVATION_SOURCES = ("explain", "log")


@dataclass(frozen=True)
class RunRecord:
    run_id: int
    label: str
    started_at: datetime
    finished_at: datetime | None
    status: str
    tool_version: str
    workload_hash: str | None
    host: str
    note: str | None = None  # why planshift set the status on its own (runs.status_note)
    kind: str = "run"  # RUN_KINDS: what made the run (runs.kind)


@dataclass(frozen=True)
class TargetRecord:
    target_id: int
    run_id: int
    name: str
    source: str
    server_version_num: int | None
    gucs: Mapping[str, str]
    info: Mapping[str, Any]


@dataclass(frozen=True)
class QueryRecord:
    query_key: str
    name: str
    sql: str
    queryid: int | None


@dataclass(frozen=True)
class PlanRecord:
    fingerprint: str
    signature: str
    shape_json: str
    plan_json: str
    first_seen: datetime


@dataclass(frozen=True)
class ObservationRow:
    """One row of `observations`: the numbers of one execution, the plan by fingerprint."""

    observation_id: int
    run_id: int
    target_id: int
    query_key: str
    point: str | None
    params: str
    sample_index: int
    fingerprint: str
    source: str
    total_cost: float
    startup_cost: float
    plan_rows: float
    actual_rows: float | None
    duration_ms: float | None
    planning_ms: float | None
    client_ms: float | None
    shared_hit: int
    shared_read: int
    shared_dirtied: int
    shared_written: int
    temp_read: int
    temp_written: int
    exact_heap_blocks: int | None
    lossy_heap_blocks: int | None
    io_read_ms: float | None
    collected_at: datetime


# Column order of `observations` as ObservationRow holds it (used by inserts and selects).
OBSERVATION_COLUMNS = tuple(ObservationRow.__dataclass_fields__)


@dataclass(frozen=True)
class PgssEntry:
    """One pg_stat_statements row, raw cumulative counters (deltas are computed when reading)."""

    queryid: int
    calls: int
    total_exec_time: float
    query: str | None = None
    userid: int | None = None
    dbid: int | None = None
    toplevel: bool | None = None
    mean_exec_time: float | None = None
    min_exec_time: float | None = None
    max_exec_time: float | None = None
    stddev_exec_time: float | None = None
    plans: int | None = None
    total_plan_time: float | None = None
    rows: int | None = None
    shared_blks_hit: int | None = None
    shared_blks_read: int | None = None
    shared_blks_dirtied: int | None = None
    shared_blks_written: int | None = None
    temp_blks_read: int | None = None
    temp_blks_written: int | None = None
    blk_read_time: float | None = None
    blk_write_time: float | None = None


PGSS_COLUMNS = tuple(PgssEntry.__dataclass_fields__)


@dataclass(frozen=True)
class PgssSnapshotRow:
    snapshot_id: int
    target_id: int
    taken_at: datetime
    entry: PgssEntry


def to_utc_naive(moment: datetime) -> datetime:
    """The store keeps naive UTC TIMESTAMPs: convert aware times, take naive ones as UTC."""
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)


def from_utc_naive(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC)


def utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)
