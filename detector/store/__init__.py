"""The DuckDB store: runs, targets, queries, plans, observations, snapshots and findings.

The only module of planshift that imports duckdb. One file, schema versioned by numbered SQL
migrations (`detector/store/migrations/NNN_name.sql`, see `detector.store.migrate`), every
table and column documented with COMMENTs (`SELECT * FROM duckdb_columns() WHERE NOT internal`).

`Store` is one facade over topic modules sharing its connection (`base.StoreBase`): `reads`
(runs, targets, plans), `runs` (writing a run), `groups` (samples grouped for comparison),
`ingest` (logs and pg_stat_statements), `results` (comparisons and findings), `failures`,
`host` (host conditions) and `owner` (which process a run belongs to); this module opens,
creates, locks and migrates the file. The current schema is in `schema.sql`.

Writes are batched: `add_observations` inserts a whole batch with one statement per table
(unnest over column lists), all in one transaction, so a failure leaves the store unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from types import TracebackType

from detector.errors import PlanshiftError
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
    NewPlan,
    observation_rows,
    plan_node_rows,
)
from detector.store.connection import check_path, connect, make_parents
from detector.store.failures import StoreFailuresMixin
from detector.store.grouped import GroupedSamples, StoreGroupsMixin, Window
from detector.store.host import StoreHostMixin
from detector.store.ingest import StoreIngestMixin
from detector.store.locking import StoreLock, WaitCallback, lock_for_writing, print_wait, store_wait
from detector.store.migrate import SCHEMA_VERSION_DDL, Migration, load_migrations, pending
from detector.store.owner import StoreOwnerMixin
from detector.store.reads import StoreReadsMixin
from detector.store.results import StoreResultsMixin
from detector.store.runs import StoreRunsMixin
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

IDENTITY_TABLES = {"schema_version", "store_identity"}  # what every store holds from birth


class Store(
    StoreReadsMixin,
    StoreRunsMixin,
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
