"""What the oldest DuckDB supported (1.5) needs: numpy columns inserted without `register`,
and a failed `import pandas` that fails at once.

DuckDB 1.5 looks for pandas for every Python value it converts (~800,000 `import pandas`
attempts for a 20 MB log when pandas is not installed, each one searching every directory of
sys.path again: 35 s of a 3 s ingest). Without pandas, a finder first on sys.meta_path answers
"no such module" at once (pandas stays absent from sys.modules: DuckDB takes a module there for
an installed pandas). And it scans a registered numpy object column whose first values are all
NULL through its pandas path, which fails ("'numpy.ndarray' object has no attribute
'first_valid_index'"): there each object column goes in as a typed array and a NULL mask.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import duckdb
import numpy as np

REGISTER_NUMPY = not duckdb.__version__.startswith("1.")


class _AbsentPandas(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "pandas":
            raise ModuleNotFoundError("No module named 'pandas'", name="pandas")
        return None


def fail_pandas_imports_fast() -> None:
    if REGISTER_NUMPY or "pandas" in sys.modules:
        return
    absent = not any(isinstance(finder, _AbsentPandas) for finder in sys.meta_path)
    if absent and importlib.util.find_spec("pandas") is None:
        sys.meta_path.insert(0, _AbsentPandas())


def insert_columns(con: Any, table: str, columns: Mapping[str, Any]) -> None:
    """INSERT numpy columns on DuckDB 1.5: each object column (strings or numbers with NULLs)
    registered as a typed array and a NULL mask, which DuckDB scans natively."""
    data: dict[str, Any] = {}
    select = []
    for name, values in columns.items():
        array = np.asarray(values)
        if array.dtype != object:
            data[name] = array
            select.append(name)
            continue
        missing = np.fromiter((v is None for v in array), bool, len(array))
        typed = _typed(array, missing)
        if typed is None:  # no value, or values numpy cannot type: as lists
            if missing.all():
                select.append(f"NULL AS {name}")
                continue
            _insert_lists(con, table, columns)
            return
        data[name], data[f"{name}__null"] = typed, missing
        cast = "::VARCHAR" if typed.dtype.kind == "U" else ""
        select.append(f"CASE WHEN {name}__null THEN NULL ELSE {name}{cast} END AS {name}")
    view = f"_planshift_{table}_typed"
    con.register(view, data)
    try:
        con.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(select)} FROM {view}"
        )
    finally:
        con.unregister(view)


# the Python types of a column's values -> what stands in for a NULL, the numpy type
_FILLS: dict[frozenset[type], tuple[Any, Any]] = {
    frozenset({str}): ("", np.str_),
    frozenset({bool}): (False, np.bool_),
    frozenset({int}): (0, np.int64),
    frozenset({float}): (0.0, np.float64),
}


def _typed(array: Any, missing: Any) -> Any:
    present = array[~missing]
    if not len(present):
        return None
    kinds = frozenset(type(v) for v in present)
    found = _FILLS.get(kinds) or (_FILLS[frozenset({float})] if kinds <= {int, float} else None)
    if found is None:
        return None
    filled, dtype = found
    complete = array.copy()
    complete[missing] = filled
    return complete.astype(dtype)


def _insert_lists(con: Any, table: str, columns: Mapping[str, Any]) -> None:
    names = list(columns)
    listed = ", ".join(names)
    unnested = ", ".join(f"unnest(${i}) AS {name}" for i, name in enumerate(names, 1))
    con.execute(
        f"INSERT INTO {table} ({listed}) SELECT {listed} FROM (SELECT {unnested})",
        [np.asarray(values).tolist() for values in columns.values()],
    )


fail_pandas_imports_fast()
