"""The DuckDB store: runs, targets, queries, plans, observations, snapshots and findings.

The only module of planshift that imports duckdb. One file, schema versioned by numbered SQL
migrations (`detector/store/migrations/NNN_name.sql`, see `detector.store.migrate`), every
table and column documented with COMMENTs (`SELECT * FROM duckdb_columns() WHERE NOT internal`).

Writes are batched: `add_observations` inserts a whole batch with one statement per table
(unnest over column lists), all in one transaction, so a failure leaves the store unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb

from detector.errors import PlanshiftError
from detector.model import Observation
from detector.model.log_rows import (
    LedgerUpdate,
    LogBatchColumns,
    LogEntryInfo,
    LogFileRecord,
    LogObservationRow,
    log_batch_columns,
)
from detector.model.records import (
    OBSERVATION_COLUMNS,
    RUN_KINDS,
    RUN_STATUSES,
    TARGET_SOURCES,
    ObservationRow,
    PgssEntry,
    PgssSnapshotRow,
    PlanRecord,
    QueryRecord,
    RunRecord,
    TargetRecord,
    to_utc_naive,
    utc_now,
)
from detector.model.rows import (
    PLAN_COLUMNS,
    PLAN_NODE_COLUMNS,
    NewPlan,
    observation_rows,
    plan_node_rows,
    reject_passwords,
    to_json,
)
from detector.store.connection import check_path, connect, make_parents
from detector.store.failures import StoreFailuresMixin
from detector.store.groups import GroupedSamples, StoreGroupsMixin, Window
from detector.store.host import StoreHostMixin
from detector.store.ingest import StoreIngestMixin
from detector.store.locking import StoreLock, WaitCallback, lock_for_writing, print_wait, store_wait
from detector.store.migrate import SCHEMA_VERSION_DDL, Migration, load_migrations, pending
from detector.store.owner import StoreOwnerMixin, this_process
from detector.store.reads import StoreReadsMixin
from detector.store.results import StoreResultsMixin
from detector.store.schema import check_schema, check_schema_version_table, refuse_code, user_tables

__all__ = [
    "OBSERVATION_COLUMNS",
    "GroupedSamples",
    "LedgerUpdate",
    "LogBatchColumns",
    "LogEntryInfo",
    "LogFileRecord",
    "LogObservationRow",
    "Migration",
    "NewPlan",
    "ObservationRow",
    "PgssEntry",
    "PgssSnapshotRow",
    "PlanRecord",
    "QueryRecord",
    "RunRecord",
    "Store",
    "TargetRecord",
    "Window",
    "log_batch_columns",
    "observation_rows",
    "plan_node_rows",
    "to_utc_naive",
    "utc_now",
]

DEFAULT_STORE_PATH = Path("planshift.duckdb")
PLAN_EXAMPLE_COLUMNS = ("target_id", "query_key", "point", "fingerprint", "plan_json")
IDENTITY_TABLES = {"schema_version", "store_identity"}  # what every store holds from birth


class Store(
    StoreReadsMixin,
    StoreGroupsMixin,
    StoreResultsMixin,
    StoreFailuresMixin,
    StoreIngestMixin,
    StoreOwnerMixin,
    StoreHostMixin,
):
    """A planshift store file. `Store(path)` creates it (and its parents) and migrates it."""

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        migrations: Sequence[Migration] | None = None,
        wait: float | None = None,
        on_wait: WaitCallback = print_wait,
    ) -> None:
        """`wait`: seconds to wait for another process holding the file (default
        PLANSHIFT_STORE_WAIT, else 60), `on_wait` hears once that it waits (default: stderr)."""
        self.path = Path(path)
        self.read_only = read_only
        self._migrations = tuple(migrations) if migrations is not None else load_migrations()
        self._depth = 0
        self._column_types: dict[str, dict[str, str]] = {}
        self.settled_runs: tuple[int, ...] = ()  # runs found orphaned and marked failed on open
        self._lock: StoreLock | None = None
        self._created_dirs: list[Path] = []
        check_path(self.path, read_only=read_only)
        seconds = store_wait() if wait is None else wait
        if not read_only:
            self._created_dirs = make_parents(self.path)
            self._lock = lock_for_writing(self.path, self._build, wait=seconds, on_wait=on_wait)
        try:
            self._con = connect(self.path, read_only=read_only, wait=seconds, on_wait=on_wait)
        except BaseException:
            self._release(discard=True)
            raise
        try:
            self._migrate()
            self._settle_orphaned_runs()
        except BaseException:
            self._con.close()
            self._release(discard=True)
            raise

    # -- opening and migrating -------------------------------------------------------------

    @property
    def _new(self) -> bool:
        """This process created the file (and alone may remove it, see detector.store.locking)."""
        return self._lock is not None and self._lock.created

    def _build(self, hidden: Path) -> None:
        """A new store, migrated, in the hidden file that detector.store.locking links into place."""
        self._con = connect(hidden, read_only=False)
        try:
            self._migrate()
            self._con.execute("CHECKPOINT")  # no WAL left beside the hidden file
        finally:
            self._con.close()

    def _release(self, *, discard: bool) -> None:
        """Give up the writer's lock; first remove the store when this process created it and
        `discard` (only for a store that holds nothing: see `_holds_nothing`)."""
        lock, self._lock = self._lock, None
        if lock is None:
            return
        if discard and lock.created:
            lock.remove(self._created_dirs)
        else:
            lock.release()

    def _migrate(self) -> None:
        refuse_code(self._con, self.path, self._migrations)
        tables = user_tables(self._con)
        if tables and "schema_version" not in tables:
            raise PlanshiftError(
                f"{self.path} is a DuckDB database but not a planshift store "
                f"(tables: {', '.join(sorted(tables))})",
                "pass another --store path; planshift does not write into foreign databases",
            )
        if tables:
            check_schema_version_table(self._con, self.path)
        current = self.schema_version if tables else 0
        latest = len(self._migrations)
        if current > latest:
            raise PlanshiftError(
                f"store {self.path} has schema version {current}, newer than this planshift "
                f"understands ({latest})",
                "upgrade planshift (e.g. `pipx upgrade planshift`) to open this store",
            )
        if tables:
            check_schema(self._con, self.path, self._migrations, current)
        todo = pending(self._migrations, current)
        if todo and self.read_only:
            # a reader of an older store migrates it first (briefly as the writer), then reads
            self._con.close()
            Store(self.path, migrations=self._migrations).close()
            self._con = connect(self.path, read_only=True)
            return
        for migration in todo:
            with self.transaction():
                if "schema_version" not in tables:
                    self._con.execute(SCHEMA_VERSION_DDL)
                    tables.add("schema_version")
                self._con.execute(migration.sql)
                self._con.execute(
                    "INSERT INTO schema_version VALUES (?, ?, ?)",
                    [migration.version, migration.name, utc_now()],
                )
        self._column_types.clear()

    def _settle_orphaned_runs(self) -> None:
        """Runs whose process died are marked failed (by a brief writer when read-only)."""
        if not self.orphaned_runs():
            return
        if not self.read_only:
            self.settled_runs = tuple(self.fail_orphaned_runs())
            return
        self._con.close()
        with suppress(PlanshiftError):  # another process holds the file: a later opener will
            writer = Store(self.path, migrations=self._migrations, wait=0)
            writer.close()
            self.settled_runs = writer.settled_runs
        self._con = connect(self.path, read_only=True)

    @property
    def store_id(self) -> str:
        """This file's identity (table store_identity; a copy of the file has the same)."""
        row = self._con.execute("SELECT min(store_id) FROM store_identity").fetchone()
        return str(row[0])

    @property
    def schema_version(self) -> int:
        row = self._con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
        return int(row[0])

    def close(self) -> None:
        self._con.close()
        self._release(discard=False)

    def __del__(self) -> None:
        """A store dropped unclosed frees its writer's lock, as DuckDB frees its own."""
        if getattr(self, "_lock", None) is not None:
            with suppress(Exception):
                self.close()

    def _holds_nothing(self) -> bool:
        """Not a row beside the schema's own: no run (a failed one is a record), no measurement,
        log, snapshot or comparison. Only such a store may be removed by its creator."""
        return all(
            self._con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] == 0
            for table in sorted(user_tables(self._con) - IDENTITY_TABLES)
        )

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """A new store a failing command left empty is removed (by the process that created it
        alone, under its lock); a store that holds anything, a failed run included, is kept."""
        discard = False
        if exc is not None and self._new and self._depth == 0:
            try:
                discard = self._holds_nothing()
            except Exception:
                discard = False
        self._con.close()
        self._release(discard=discard)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside commit together or not at all; nested calls join the outer one."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._con.begin()
        self._depth = 1
        try:
            yield
        except BaseException:
            self._con.rollback()
            raise
        else:
            self._con.commit()
        finally:
            self._depth = 0

    def _insert_rows(self, table: str, names: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """INSERT a batch with one statement: one list parameter per column, unnested together.

        Some 70 times faster than executemany (10,000 rows: 0.07 s against 5 s).
        """
        if not rows:
            return
        columns = [list(column) for column in zip(*rows, strict=True)]
        if len(columns) != len(names):
            raise ValueError(f"{table}: {len(names)} columns named, rows have {len(columns)}")
        types = self._types_of(table)
        selects = ", ".join(f"unnest(${i}::{types[name]}[])" for i, name in enumerate(names, 1))
        self._con.execute(f"INSERT INTO {table} ({', '.join(names)}) SELECT {selects}", columns)

    def _types_of(self, table: str) -> dict[str, str]:
        if table not in self._column_types:
            rows = self._con.execute(
                "SELECT column_name, data_type FROM duckdb_columns() "
                "WHERE NOT internal AND table_name = ?",
                [table],
            ).fetchall()
            self._column_types[table] = {name: data_type for name, data_type in rows}
        return self._column_types[table]

    # -- writing ---------------------------------------------------------------------------

    def begin_run(
        self,
        label: str,
        *,
        workload_hash: str | None,
        tool_version: str,
        host: str,
        kind: str = "run",
    ) -> int:
        """A new `running` run, owned by this process (see detector.store.owner)."""
        if kind not in RUN_KINDS:
            raise PlanshiftError(f"unknown run kind {kind!r}", f"use one of {', '.join(RUN_KINDS)}")
        row = self._con.execute(
            "INSERT INTO runs (label, started_at, status, tool_version, workload_hash, host, kind) "
            "VALUES (?, ?, 'running', ?, ?, ?, ?) RETURNING run_id",
            [label, utc_now(), tool_version, workload_hash, host, kind],
        ).fetchone()
        run_id = int(row[0])
        if self._tracks_owners():
            owner = this_process()
            self._con.execute(
                "UPDATE runs SET owner_host = ?, owner_pid = ?, owner_started = ? WHERE run_id = ?",
                [owner.host, owner.pid, owner.started, run_id],
            )
        return run_id

    def finish_run(self, run_id: int, status: str = "complete", note: str | None = None) -> None:
        """Mark the run complete or failed; `note` says why (runs.status_note)."""
        if status not in RUN_STATUSES or status == "running":
            raise PlanshiftError(f"a run cannot finish as {status!r}", "use complete or failed")
        rows = self._con.execute(
            "UPDATE runs SET status = ?, finished_at = ?, status_note = coalesce(?, status_note) "
            "WHERE run_id = ? RETURNING run_id",
            [status, utc_now(), note, run_id],
        ).fetchall()
        if not rows:
            raise PlanshiftError(f"no run with id {run_id} in {self.path}")

    def add_target(
        self,
        run_id: int,
        name: str,
        *,
        source: str,
        server_version_num: int | None,
        gucs: Mapping[str, str],
        info: Mapping[str, Any],
    ) -> int:
        if source not in TARGET_SOURCES:
            raise PlanshiftError(f"unknown target source {source!r}", "use embedded, dsn or log")
        reject_passwords(info=info, gucs=gucs)
        with self.transaction():
            if not self._con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchall():
                raise PlanshiftError(f"no run with id {run_id} in {self.path}")
            row = self._con.execute(
                "INSERT INTO targets (run_id, name, source, server_version_num, gucs, info) "
                "VALUES (?, ?, ?, ?, ?, ?) RETURNING target_id",
                [run_id, name, source, server_version_num, to_json(dict(gucs)), to_json(info)],
            ).fetchone()
        return int(row[0])

    def file_target_info(self, target_id: int, key: str, entry: str, value: dict[str, Any]) -> None:
        """Merge value into info[key][entry] of a target (what a run learns after adding it)."""
        with self.transaction():
            row = self._con.execute(
                "SELECT info FROM targets WHERE target_id = ?", [target_id]
            ).fetchone()
            if row is None:
                raise PlanshiftError(f"no target with id {target_id} in {self.path}")
            info = json.loads(row[0]) if isinstance(row[0], str) else dict(row[0] or {})
            info.setdefault(key, {}).setdefault(entry, {}).update(value)
            self._con.execute(
                "UPDATE targets SET info = ? WHERE target_id = ?", [to_json(info), target_id]
            )

    def upsert_query(
        self, query_key: str, *, name: str, sql: str, queryid: int | None = None
    ) -> None:
        """Insert or update a query; a known queryid is kept when the new one is None."""
        self._con.execute(
            "INSERT INTO queries VALUES (?, ?, ?, ?) ON CONFLICT (query_key) DO UPDATE SET "
            "name = excluded.name, sql = excluded.sql, "
            "queryid = coalesce(excluded.queryid, queries.queryid)",
            [query_key, name, sql, queryid],
        )

    def add_observations(self, observations: Sequence[Observation]) -> int:
        """Store a batch: plans and plan_nodes of unseen fingerprints, then one row each.

        One transaction: if anything fails, nothing of the batch is stored. Returns the count.
        """
        if not observations:
            return 0
        try:
            with self.transaction():
                run_of_target = self._runs_of_targets({obs.target_id for obs in observations})
                rows, shapes = observation_rows(observations, run_of_target)
                new = self._unseen(shapes)
                plan_rows = [shape.plan_row for shape in new]
                node_rows = [node for shape in new for node in shape.nodes]
                self._insert_rows("plans", PLAN_COLUMNS, plan_rows)
                self._insert_rows("plan_nodes", PLAN_NODE_COLUMNS, node_rows)
                self._insert_rows("observations", OBSERVATION_COLUMNS[1:], rows)
                self._insert_rows(
                    "plan_examples", PLAN_EXAMPLE_COLUMNS, self._new_examples(observations, rows)
                )
        except (duckdb.ConversionException, duckdb.ConstraintException) as exc:
            raise PlanshiftError(
                f"cannot store {len(observations)} observations: {exc}",
                "nothing of this batch was stored; check the observation values",
            ) from exc
        return len(observations)

    def _new_examples(
        self, observations: Sequence[Observation], rows: Sequence[Sequence[Any]]
    ) -> list[tuple[Any, ...]]:
        """The first EXPLAIN of each target x query x point x shape not stored yet."""
        first: dict[tuple[int, str, str | None, str], tuple[int, str]] = {}
        for obs, row in zip(observations, rows, strict=True):
            key = (
                obs.target_id,
                obs.query_key,
                obs.point,
                row[OBSERVATION_COLUMNS.index("fingerprint") - 1],
            )
            if key not in first or obs.sample_index < first[key][0]:
                first[key] = (obs.sample_index, obs.plan_json)
        stored = set(
            self._con.execute(
                "SELECT target_id, query_key, point, fingerprint FROM plan_examples "
                "WHERE target_id IN (SELECT unnest($1::BIGINT[]))",
                [sorted({key[0] for key in first})],
            ).fetchall()
        )
        return [(*key, plan_json) for key, (_, plan_json) in first.items() if key not in stored]

    def _runs_of_targets(self, target_ids: Iterable[int]) -> dict[int, int]:
        rows = self._con.execute(
            "SELECT target_id, run_id FROM targets WHERE target_id IN (SELECT unnest($1))",
            [sorted(target_ids)],
        ).fetchall()
        return dict(rows)

    def _unseen(self, shapes: Mapping[str, NewPlan]) -> list[NewPlan]:
        """The shapes whose fingerprint is not in `plans` yet, by fingerprint."""
        rows = self._con.execute(
            "SELECT fingerprint FROM plans WHERE fingerprint IN (SELECT unnest($1))",
            [sorted(shapes)],
        ).fetchall()
        seen = {row[0] for row in rows}
        return [shapes[key] for key in sorted(shapes) if key not in seen]
