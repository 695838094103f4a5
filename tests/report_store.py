"""The committed report fixture store, copied once per test session (opening it migrates it)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from functools import cache
from pathlib import Path

COMMITTED = Path(__file__).resolve().parent / "fixtures" / "reports" / "store.duckdb"


@cache
def fixed_store() -> Path:
    directory = Path(tempfile.mkdtemp(prefix="planshift-report-store-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    copy = directory / "store.duckdb"
    shutil.copyfile(COMMITTED, copy)
    return copy
