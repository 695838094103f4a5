"""DuckDB extensions a lake needs (ducklake, httpfs, postgres), loaded from wheels or an INSTALL.

planshift never downloads an extension: autoinstall stays off. An extension is loaded from
(1) its PyPI wheel (`duckdb-extension-NAME`, published for DuckDB 1.5.x: the package holds
`extensions/vX.Y.Z/NAME.duckdb_extension` and must match DuckDB's version exactly), LOADed by
path; or (2) DuckDB's own extension directory, where a user with network access to DuckDB's
extension repository put it once with `INSTALL NAME`. Otherwise the error says which of the two
to do for the DuckDB installed.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path
from typing import Any

import duckdb

from detector.errors import PlanshiftError

# the extension's name inside DuckDB, where it differs from the wheel's (the entry point is
# named after the file: postgres.duckdb_extension holds postgres_scanner_init)
_LOADED_AS = {"postgres": "postgres_scanner"}


def wheel_file(name: str) -> Path | None:
    """The extension file of the `duckdb-extension-NAME` wheel built for this DuckDB, if any."""
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or not spec.submodule_search_locations:
        return None
    home = Path(next(iter(spec.submodule_search_locations)))
    found = home / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    return found if found.is_file() else None


def load(con: Any, name: str) -> None:
    """LOAD the extension `name` into `con` (from its wheel, else an earlier INSTALL)."""
    internal = _LOADED_AS.get(name, name)
    if _loaded(con, internal):
        return
    found = wheel_file(name)
    if found is not None:
        con.execute(f"LOAD '{_named(found, internal)}'")
        return
    try:
        con.execute(f"LOAD {internal}")
    except duckdb.Error as exc:
        raise PlanshiftError(
            f"DuckDB {duckdb.__version__} has no {name} extension here ({exc})",
            _hint(name),
        ) from None


def available(name: str) -> bool:
    """Whether `load` would find the extension (a wheel, or an earlier INSTALL)."""
    if wheel_file(name) is not None:
        return True
    with duckdb.connect(config={"autoinstall_known_extensions": False}) as con:
        rows = con.execute(
            "SELECT installed FROM duckdb_extensions() WHERE extension_name = ?",
            [_LOADED_AS.get(name, name)],
        ).fetchall()
    return bool(rows and rows[0][0])


def _loaded(con: Any, internal: str) -> bool:
    rows = con.execute(
        "SELECT loaded FROM duckdb_extensions() WHERE extension_name = ?", [internal]
    ).fetchall()
    return bool(rows and rows[0][0])


def _named(found: Path, internal: str) -> str:
    """A path to the file whose name gives DuckDB the extension's entry point: the wheel's own,
    or a symlink named `INTERNAL.duckdb_extension` beside planshift's other caches."""
    if found.stem == internal:
        return _literal(found)
    mine = Path(tempfile.gettempdir()) / f"planshift-extensions-{os.getuid()}"
    mine.mkdir(exist_ok=True, mode=0o700)
    if mine.is_symlink() or mine.stat().st_uid != os.getuid() or mine.stat().st_mode & 0o022:
        raise PlanshiftError(
            f"{mine} is not this user's own directory: the {internal} extension is not loaded "
            "through it",
            f"remove {mine} (planshift makes it, mode 0700, to name the extension for DuckDB)",
        )
    home = mine / duckdb.__version__
    home.mkdir(exist_ok=True, mode=0o700)
    link = home / f"{internal}.duckdb_extension"
    if not (link.is_symlink() and link.resolve() == found.resolve()):
        staging = home / f".{internal}.{os.getpid()}.tmp"
        staging.unlink(missing_ok=True)
        staging.symlink_to(found)
        os.replace(staging, link)
    return _literal(link)


def _literal(path: Path) -> str:
    return str(path).replace("'", "''")


def _hint(name: str) -> str:
    if duckdb.__version__.startswith("1.5."):
        return (
            f"pip install duckdb-extension-{name}=={duckdb.__version__} into planshift's "
            "environment (or `pip install 'planshift[ducklake]'`)"
        )
    return (
        f"run `INSTALL {_LOADED_AS.get(name, name)}` once in DuckDB {duckdb.__version__} (it needs "
        "network access to DuckDB's extension repository), or install planshift with "
        "DuckDB 1.5.5 and the extension wheels: pip install 'planshift[ducklake]'"
    )
