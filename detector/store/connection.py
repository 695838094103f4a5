"""Opening a store file safely: DuckDB locked down, damaged files reported as user errors.

A store file is data, never code: DuckDB opens it with external access (files, HTTP) and
extension install/load turned off and its configuration locked, so a view or a default in a
hostile file cannot read `/etc/passwd` and a SQLite file cannot make DuckDB download an
extension. Every statement goes through `GuardedConnection`, which turns the errors of a
damaged or truncated file (I/O, permission) into `PlanshiftError`s that name the file.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import duckdb

from detector.errors import PlanshiftError
from detector.store.locking import POLL_S, WAIT_VARIABLE, WaitCallback, describe_process, print_wait

SAFE_CONFIG: dict[str, Any] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "lock_configuration": True,
}
_SQLITE_MAGIC = b"SQLite format 3\x00"
_DUCKDB_MAGIC = b"DUCK"
_DAMAGED_HINT = "the file is damaged or truncated: restore it from a copy, or pass another --store"
_DAMAGE_ERRORS = (duckdb.IOException, duckdb.PermissionException, duckdb.SerializationException)
# what DuckDB says of a damaged file outside its I/O errors (a block whose checksum differs)
_DAMAGE_TEXTS = ("Corrupt database file", "checksum", "database has been invalidated")
# errors of a file or file system that refuses writes: not damage, and a different fix
_NOT_WRITABLE_TEXTS = (
    "Operation not permitted",
    "Read-only file system",
    "No space left on device",
    "Disk quota exceeded",
)


def check_path(path: Path, *, read_only: bool) -> None:
    """Refuse paths that cannot be a store before DuckDB sees them (with the reason)."""
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise PlanshiftError(
                f"cannot use store {path}: {parent} is a file, not a directory",
                "pass a --store path inside a directory",
            )
    if path.is_dir():
        raise PlanshiftError(
            f"{path} is a directory, not a DuckDB database file",
            "pass a planshift store (--store), or a new file name to create one",
        )
    if read_only and not path.exists():
        raise PlanshiftError(
            f"store {path} does not exist", "collect a run first, or pass the right --store"
        )
    if path.exists():
        _check_header(path)


def _check_header(path: Path) -> None:
    try:
        with path.open("rb") as file:
            head = file.read(16)
    except OSError as exc:
        raise PlanshiftError(
            f"cannot read store {path}: {exc.strerror}", _access_hint(path)
        ) from exc
    if head.startswith(_SQLITE_MAGIC):
        raise PlanshiftError(
            f"{path} is a SQLite database, not a planshift store",
            "pass a planshift store (--store), or a new file name to create one",
        )
    if head and head[8:12] != _DUCKDB_MAGIC:
        raise PlanshiftError(
            f"{path} is not a DuckDB database file",
            "pass a planshift store (--store), or a new file name to create one",
        )


def _access_hint(path: Path) -> str:
    return f"check the permissions of {path} and its directory"


def connect(
    path: Path, *, read_only: bool, wait: float = 0.0, on_wait: WaitCallback = print_wait
) -> GuardedConnection:
    """The store's connection; while another process's DuckDB holds the file (a writer, for a
    reader; a program other than planshift), retried for up to `wait` seconds."""
    deadline = time.monotonic() + wait
    announced = False
    while True:
        try:
            raw = duckdb.connect(str(path), read_only=read_only, config=SAFE_CONFIG)
        except duckdb.Error as exc:
            if not _is_lock_conflict(exc) or time.monotonic() >= deadline:
                raise open_error(path, exc, waited=wait) from exc
            if not announced:
                on_wait(
                    f"store {path} is in use{_holder(exc)}: waiting for it "
                    f"(up to {wait:g} s, {WAIT_VARIABLE})"
                )
                announced = True
            time.sleep(POLL_S)
            continue
        return GuardedConnection(raw, path)


def _is_lock_conflict(exc: BaseException) -> bool:
    return "Could not set lock" in str(exc) or "Conflicting lock" in str(exc)


def _holder(exc: BaseException) -> str:
    found = re.search(r"\(PID (\d+)\)", str(exc))
    return f" by {describe_process(int(found.group(1)))}" if found else ""


def open_error(path: Path, exc: BaseException, *, waited: float = 0.0) -> PlanshiftError:
    text = str(exc)
    if "not a valid DuckDB database file" in text or "Is a directory" in text:
        return PlanshiftError(
            f"{path} is not a DuckDB database file",
            "pass a planshift store (--store), or a new file name to create one",
        )
    if _is_lock_conflict(exc):
        return PlanshiftError(
            f"store {path} is still in use{_holder(exc)} after {waited:g} s",
            f"DuckDB allows one writer per file: wait for it to finish, pass another --store, "
            f"or wait longer with {WAIT_VARIABLE}=SECONDS",
        )
    if any(reason in text for reason in _NOT_WRITABLE_TEXTS):
        return PlanshiftError(f"store {path} is not writable: {text}", _writable_hint(path, text))
    if "Permission denied" in text:
        return PlanshiftError(f"cannot open store {path}: {text}", _access_hint(path))
    return PlanshiftError(f"cannot open store {path}: {text}", _DAMAGED_HINT)


def _writable_hint(path: Path, text: str = "") -> str:
    if "No space left" in text or "quota" in text:
        return (
            f"the file system of {path} is full: free space (`df {path.parent}`) and rerun; what "
            "the store held before stays (the failed write was rolled back)"
        )
    return (
        f"check its permissions, `lsattr {path}` (the immutable attribute, chattr -i) and "
        "whether its file system is mounted read-only; or pass another --store"
    )


class GuardedConnection:
    """The DuckDB connection of a store; what a damaged, unwritable, full or busy file raises
    becomes a PlanshiftError that names the file and the fix (exit 2, never a traceback)."""

    def __init__(self, con: Any, path: Path) -> None:
        self._con = con
        self._path = path

    @contextmanager
    def _guard(self, verb: str) -> Iterator[None]:
        try:
            yield
        except duckdb.Error as exc:
            error = store_error(self._path, exc, verb)
            if error is None:
                raise
            raise error from exc

    def execute(self, sql: str, parameters: Any = None) -> GuardedConnection:
        with self._guard("read"):
            if parameters is None:
                self._con.execute(sql)
            else:
                self._con.execute(sql, parameters)
        return self

    def fetchall(self) -> list[Any]:
        with self._guard("read"):
            return list(self._con.fetchall())

    def fetchone(self) -> Any:
        with self._guard("read"):
            return self._con.fetchone()

    def fetchnumpy(self) -> Any:
        with self._guard("read"):
            return self._con.fetchnumpy()

    def begin(self) -> None:
        with self._guard("write"):
            self._con.begin()

    def commit(self) -> None:
        with self._guard("write"):
            self._con.commit()

    def rollback(self) -> None:
        """Called while another error propagates: a rollback the damage refuses stays silent."""
        with suppress(duckdb.Error):
            self._con.rollback()

    def register(self, name: str, data: Any) -> None:
        self._con.register(name, data)

    def unregister(self, name: str) -> None:
        self._con.unregister(name)

    def close(self) -> None:
        with suppress(duckdb.Error):  # a database invalidated by damage closes all the same
            self._con.close()


def store_error(path: Path, exc: BaseException, verb: str) -> PlanshiftError | None:
    """The user's view of a DuckDB error on a store file; None for errors that are not about
    the file (a bug: raised as they are)."""
    text = str(exc)
    if _is_lock_conflict(exc):
        return PlanshiftError(
            f"store {path} is in use{_holder(exc)}",
            "another process opened it meanwhile; rerun when it is done, or pass another --store",
        )
    if any(reason in text for reason in _NOT_WRITABLE_TEXTS):
        return PlanshiftError(f"cannot write store {path}: {text}", _writable_hint(path, text))
    damaged = isinstance(exc, _DAMAGE_ERRORS) or any(word in text for word in _DAMAGE_TEXTS)
    if damaged or isinstance(exc, duckdb.FatalException):
        return PlanshiftError(f"cannot {verb} store {path}: {text}", _DAMAGED_HINT)
    return None


@contextmanager
def lake_connection(directories: Sequence[Path], files: Sequence[Path] = ()) -> Iterator[Any]:
    """An in-memory DuckDB for a lake's reads and exports, as locked down as a store's: files
    only inside `directories` (and the `files` named, e.g. a store and its WAL), symlinks that
    lead elsewhere refused, no extension installed or loaded, configuration locked."""
    scratch = Path(tempfile.mkdtemp(prefix="planshift-duckdb-"))
    allowed = [*directories, scratch]
    con = duckdb.connect(config={k: v for k, v in SAFE_CONFIG.items() if k in _EXTENSIONS_OFF})
    try:
        con.execute(f"SET temp_directory = {_literal(scratch)}")
        con.execute(f"SET allowed_directories = [{', '.join(_literal(d, '/') for d in allowed)}]")
        if files:
            con.execute(f"SET allowed_paths = [{', '.join(_literal(f) for f in files)}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        yield con
    finally:
        con.close()
        shutil.rmtree(scratch, ignore_errors=True)


_EXTENSIONS_OFF = (
    "autoinstall_known_extensions",
    "autoload_known_extensions",
    "allow_community_extensions",
)


def _literal(path: Path, suffix: str = "") -> str:
    return "'" + (str(path.resolve()) + suffix).replace("'", "''") + "'"


def attach_store(con: Any, path: Path, alias: str, *, read_only: bool, wait: float) -> None:
    """ATTACH a store to a lake connection, waiting (like `connect`) while a writer holds it."""
    deadline = time.monotonic() + wait
    mode = " (READ_ONLY)" if read_only else ""
    while True:
        try:
            con.execute(f"ATTACH {_literal(path)} AS {alias}{mode}")
            return
        except duckdb.Error as exc:
            if not _is_lock_conflict(exc) or time.monotonic() >= deadline:
                raise open_error(path, exc, waited=wait) from exc
            time.sleep(POLL_S)


def make_parents(path: Path) -> list[Path]:
    """Create the missing parent directories of a new store; returns them, deepest first."""
    missing = [parent for parent in path.parents if not parent.exists()]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PlanshiftError(
            f"cannot create the directory of store {path}: {exc.strerror}", _access_hint(path)
        ) from exc
    return missing
