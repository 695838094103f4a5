"""Numpy columns reach the store alike on every DuckDB supported (1.5's own path included)."""

from __future__ import annotations

import duckdb
import numpy as np

from detector.store.compat import insert_columns


def test_object_columns_with_nulls_are_inserted_as_given() -> None:
    n = 3000
    columns = {
        "id": np.arange(n),
        "text": np.array([None] * 2000 + [f"q{i}" for i in range(1000)], dtype=object),
        "nothing": np.array([None] * n, dtype=object),
        "count": np.array([None, 7] * (n // 2), dtype=object),
        "ms": np.array([1, None, 2.5] * (n // 3), dtype=object),
        "flag": np.array([True, None, False] * (n // 3), dtype=object),
        "params": np.array([{"$1": 1}] + [None] * (n - 1), dtype=object),
    }
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t (id BIGINT, text VARCHAR, nothing DOUBLE, count BIGINT, ms DOUBLE, flag BOOLEAN, params VARCHAR)"
    )
    insert_columns(con, "t", {k: v for k, v in columns.items() if k != "params"})
    expected = [
        tuple(None if v is None else v for v in row)
        for row in zip(
            *(columns[k].tolist() for k in ("id", "text", "nothing", "count", "ms", "flag")),
            strict=True,
        )
    ]
    assert (
        con.execute("SELECT id, text, nothing, count, ms, flag FROM t ORDER BY id").fetchall()
        == expected
    )
    con.execute("DELETE FROM t")
    insert_columns(
        con, "t", {"id": columns["id"], "params": np.array(["{}"] + [None] * (n - 1), dtype=object)}
    )
    assert con.execute("SELECT count(params), count(*) FROM t").fetchone() == (1, n)
