"""Opening a store file safely: DuckDB locked down, damaged files reported as user errors.

A store file is data, never code: DuckDB opens it with external access (files, HTTP) and
extension install/load turned off and its configuration locked, so a view or a default in a
hostile file cannot read `/etc/passwd` and a SQLite file cannot make DuckDB download an
extension. Every statement goes through `GuardedConnection`, which turns the errors of a
damaged or truncated file (I/O, permission) into `PlanshiftError`s that name the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from detector.errors import PlanshiftError

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


def connect(path: Path, *, read_only: bool) -> GuardedConnection:
    try:
        raw = duckdb.connect(str(path), read_only=read_only, config=SAFE_CONFIG)
    except duckdb.Error as exc:
        raise open_error(path, exc) from exc
    return GuardedConnection(raw, path)


def open_error(path: Path, exc: BaseException) -> PlanshiftError:
    text = str(exc)
    if "not a valid DuckDB database file" in text or "Is a directory" in text:
        return PlanshiftError(
            f"{path} is not a DuckDB database file",
            "pass a planshift store (--store), or a new file name to create one",
        )
    if "lock" in text.lower():
        return PlanshiftError(
            f"cannot open store {path}: {text}",
            "is another planshift process writing to it? DuckDB allows one writer per file",
        )
    if "Permission denied" in text or "Read-only file system" in text:
        return PlanshiftError(f"cannot open store {path}: {text}", _access_hint(path))
    return PlanshiftError(f"cannot open store {path}: {text}", _DAMAGED_HINT)


class GuardedConnection:
    """The DuckDB connection of a store; damage found while reading becomes a PlanshiftError."""

    def __init__(self, con: Any, path: Path) -> None:
        self._con = con
        self._path = path

    def _damaged(self, exc: BaseException) -> PlanshiftError:
        return PlanshiftError(f"cannot read store {self._path}: {exc}", _DAMAGED_HINT)

    def execute(self, sql: str, parameters: Any = None) -> GuardedConnection:
        try:
            if parameters is None:
                self._con.execute(sql)
            else:
                self._con.execute(sql, parameters)
        except _DAMAGE_ERRORS as exc:
            raise self._damaged(exc) from exc
        return self

    def fetchall(self) -> list[Any]:
        try:
            return list(self._con.fetchall())
        except _DAMAGE_ERRORS as exc:
            raise self._damaged(exc) from exc

    def fetchone(self) -> Any:
        try:
            return self._con.fetchone()
        except _DAMAGE_ERRORS as exc:
            raise self._damaged(exc) from exc

    def fetchnumpy(self) -> Any:
        try:
            return self._con.fetchnumpy()
        except _DAMAGE_ERRORS as exc:
            raise self._damaged(exc) from exc

    def begin(self) -> None:
        self._con.begin()

    def commit(self) -> None:
        try:
            self._con.commit()
        except _DAMAGE_ERRORS as exc:
            raise PlanshiftError(f"cannot write store {self._path}: {exc}", _DAMAGED_HINT) from exc

    def rollback(self) -> None:
        self._con.rollback()

    def register(self, name: str, data: Any) -> None:
        self._con.register(name, data)

    def unregister(self, name: str) -> None:
        self._con.unregister(name)

    def close(self) -> None:
        self._con.close()


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


def remove_new_store(path: Path, created_dirs: list[Path]) -> None:
    """Undo the creation of a store that never held anything: the file, its WAL, its parents."""
    for leftover in (path, path.with_name(path.name + ".wal")):
        leftover.unlink(missing_ok=True)
    for directory in created_dirs:
        try:
            directory.rmdir()
        except OSError:
            break
