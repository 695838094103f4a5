"""Schema migrations of the store: numbered SQL files, `NNN_description.sql`, applied in order.

The files live in the package `detector.store.migrations` (shipped as package data). Tests and
tools may pass another directory to `load_migrations` to exercise the upgrade path.
This module reads files only; `detector.store` applies them (it alone imports duckdb).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

MIGRATIONS_PACKAGE = "detector.store.migrations"
_FILE_NAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")

# Bootstrap table, created before any migration: one row per applied migration.
SCHEMA_VERSION_DDL = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    name VARCHAR NOT NULL,
    applied_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE schema_version IS
    'Applied migrations of the planshift store; max(version) is the schema version.';
COMMENT ON COLUMN schema_version.version IS
    'Migration number (the NNN of detector/store/migrations/NNN_name.sql).';
COMMENT ON COLUMN schema_version.name IS
    'Migration file name without the number and .sql, e.g. "initial".';
COMMENT ON COLUMN schema_version.applied_at IS
    'When the migration was applied to this file (UTC).';
"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def file_name(self) -> str:
        return f"{self.version:03d}_{self.name}.sql"


def load_migrations(directory: Path | Traversable | None = None) -> tuple[Migration, ...]:
    """Read `NNN_name.sql` files from `directory` (default: the packaged migrations), in order.

    Numbers must run 1, 2, 3 ... without gaps; anything else is a packaging bug (ValueError).
    """
    root: Path | Traversable = (
        directory if directory is not None else resources.files(MIGRATIONS_PACKAGE)
    )
    found: list[Migration] = []
    for entry in root.iterdir():
        match = _FILE_NAME.match(entry.name)
        if match is None:
            if entry.name.endswith(".sql"):
                raise ValueError(f"migration file {entry.name!r} is not named NNN_name.sql")
            continue
        found.append(Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda migration: migration.version)
    check_sequence(found)
    return tuple(found)


def check_sequence(migrations: Sequence[Migration]) -> None:
    expected = list(range(1, len(migrations) + 1))
    actual = [migration.version for migration in migrations]
    if actual != expected:
        raise ValueError(f"migrations must be numbered 1..{len(migrations)} without gaps: {actual}")


def pending(migrations: Sequence[Migration], current_version: int) -> list[Migration]:
    return [migration for migration in migrations if migration.version > current_version]
