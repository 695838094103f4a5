"""Where collectors write: the seams between `collectors` and the store.

`detector.store.Store` implements both Protocols; collectors depend on these alone, so they
never import the store (or duckdb). A test or another backend can pass any object that has
these methods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from detector.model.failures import QueryFailure
from detector.model.host import HostSample
from detector.model.log_rows import ColumnKind, LedgerUpdate, LogBatchColumns, LogFileRecord
from detector.model.observation import Observation
from detector.model.records import QueryRecord, TargetRecord
from detector.model.rows import NewPlan


class RunSink(Protocol):
    """What the EXPLAIN runner writes: a run, its targets, queries, observations and the
    executions that failed."""

    def begin_run(
        self,
        label: str,
        *,
        workload_hash: str | None,
        tool_version: str,
        host: str,
        kind: str = "run",
    ) -> int: ...

    def add_target(
        self,
        run_id: int,
        name: str,
        *,
        source: str,
        server_version_num: int | None,
        gucs: Mapping[str, str],
        info: Mapping[str, Any],
    ) -> int: ...

    def file_target_info(
        self, target_id: int, key: str, entry: str, value: dict[str, Any]
    ) -> None: ...

    def upsert_query(
        self, query_key: str, *, name: str, sql: str, queryid: int | None = None
    ) -> None: ...

    def add_observations(self, observations: Sequence[Observation]) -> int: ...

    def add_query_failures(self, failures: Sequence[QueryFailure]) -> int: ...

    def finish_run(
        self, run_id: int, status: str = "complete", note: str | None = None
    ) -> None: ...

    def add_host_samples(self, run_id: int, samples: Sequence[HostSample]) -> None: ...


class LogSink(Protocol):
    """What the log reader writes: the ledger of files and batches of observations."""

    def queries(self) -> Mapping[str, QueryRecord]: ...

    def targets(self, run_ids: Sequence[int] | None = None) -> Sequence[TargetRecord]: ...

    def log_column_kinds(self) -> dict[str, ColumnKind]: ...

    def log_files(self) -> Sequence[LogFileRecord]: ...

    def add_log_file(
        self, path: str, *, log_format: str, compressed: bool, head_len: int, head_sha256: str
    ) -> int: ...

    def logged_executions(
        self, since: datetime, until: datetime, target_ids: Sequence[int]
    ) -> list[tuple[Any, ...]]: ...

    def latest_log_time(self, target_ids: Sequence[int] | None = None) -> datetime | None: ...

    def logged_events(self, since: datetime, until: datetime) -> list[tuple[Any, ...]]: ...

    def log_file_ids(self, target_ids: Sequence[int], paths: Sequence[str]) -> set[int]: ...

    def add_log_batch(
        self,
        file_id: int,
        columns: LogBatchColumns,
        shapes: Sequence[NewPlan],
        queries: Mapping[str, tuple[str, str, int | None]],
        problems: Sequence[tuple[int, str, str]],
        ledger: LedgerUpdate,
        unlabel: Sequence[int] = (),
        events: Sequence[Sequence[Any]] = (),
    ) -> None: ...

    def drop_ambiguous_queryids(self) -> int: ...
