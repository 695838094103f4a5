"""What an ingest stores, every table in full, is what it stored when the golden dump was taken.

The real logs of tests/fixtures/logs (PostgreSQL 15, 17 and 18 in stderr, csvlog and jsonlog;
JSON and text plans; an incident, quirks, prepared statements, events and the reproduced bugs)
are ingested one per store; each table is dumped row by row, ordered, and compared with
tests/fixtures/logs/ingest_dump.json: its row count and the SHA-256 of its rows, over the
columns the golden names (a column a later migration adds is not compared until the golden
is taken again). Columns that say when and where an ingest ran are left out.

A speed-up of the ingest must leave this test passing untouched; a change that is meant to
store something else takes the golden again, from a checkout, and says so in its commit:

    .venv/bin/python tests/test_ingest_dump.py --write
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from detector.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import ingest

LOGS_DIR = Path(__file__).resolve().parent / "fixtures" / "logs"
GOLDEN = LOGS_DIR / "ingest_dump.json"
LOGS = [
    *(f"{d}/pg.{s}" for d in ("pg15", "pg17", "pg18", "incident", "quirks") for s in ("log", "csv", "json")),
    *(f"events/pg.{s}" for s in ("log", "csv", "json")),
    "prepared/pg.log",
    "prepared/reload.log",
    "repro/latin1_byte.stderr.log",
    "repro/nested_qid.stderr.log",
    "repro/nested_qid.csv",
    "repro/nested_qid.json",
    "repro/text_hash_node.stderr.log",
    "repro/text_subplan_attach.stderr.log",
    "repro/utf8_before_param.stderr.log",
]  # fmt: skip
# when, where and by which process the ingest ran, not what the log holds
VOLATILE = {
    "applied_at", "first_ingested_at", "last_ingested_at", "recorded_at", "started_at",
    "finished_at", "owner_host", "owner_pid", "owner_started", "path",
}  # fmt: skip
VOLATILE_TABLES = {"store_identity", "store_owner"}


def dump(store_path: Path) -> dict[str, dict[str, Any]]:
    """{table: {columns, rows, sha256}} of every table of the store."""
    tables: dict[str, dict[str, Any]] = {}
    with Store(store_path, read_only=True) as store:
        con = store._con
        names = [
            row[0]
            for row in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE NOT internal ORDER BY table_name"
            ).fetchall()
        ]
        for table in names:
            if table in VOLATILE_TABLES:
                continue
            columns = [
                row[0]
                for row in con.execute(
                    "SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
                    "ORDER BY column_index",
                    [table],
                ).fetchall()
                if row[0] not in VOLATILE
            ]
            tables[table] = {"columns": columns, **_digest(con, table, columns)}
    return tables


def _digest(con: Any, table: str, columns: list[str]) -> dict[str, Any]:
    listed = ", ".join(f'"{c}"' for c in columns)
    rows = con.execute(f'SELECT {listed} FROM "{table}" ORDER BY ALL').fetchall()
    digest = hashlib.sha256()
    for row in rows:
        digest.update(repr(row).encode())
        digest.update(b"\n")
    return {"rows": len(rows), "sha256": digest.hexdigest()}


def ingested(tmp: Path, log: str) -> Path:
    store = tmp / (log.replace("/", "_") + ".duckdb")
    ingest(store, LOGS_DIR / log, prefix=None)
    return store


@pytest.mark.parametrize("log", LOGS)
def test_every_table_holds_what_the_golden_ingest_stored(tmp_path: Path, log: str) -> None:
    golden = json.loads(GOLDEN.read_text())[log]
    store = ingested(tmp_path, log)
    with Store(store, read_only=True) as opened:
        con = opened._con
        found = {
            table: _digest(con, table, expected["columns"]) for table, expected in golden.items()
        }
    expected = {
        table: {k: v for k, v in t.items() if k != "columns"} for table, t in golden.items()
    }
    assert found == expected


def write_golden() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        golden = {log: dump(ingested(Path(tmp), log)) for log in LOGS}
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_golden()
