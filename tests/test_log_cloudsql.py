"""Cloud SQL exports as Cloud Logging writes them: one entry per line of postgres.log, a line
over ~100 kB cut into several entries (tests/fixtures/logs/managed/cloudsql-lines.json.gz,
wrapped from the real PostgreSQL 18 log cloudsql18.log.gz, see capture_cloudsql.py). The export
must read exactly as the log it wraps."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from test_log_managed import ingest, stored

from collectors.logs import autoexplain as autoexplain_log
from collectors.logs import parallel as log_parallel
from collectors.logs.registry import detect_format
from detector.store import Store

MANAGED = Path(__file__).resolve().parent / "fixtures" / "logs" / "managed"
EXPORT = MANAGED / "cloudsql-lines.json.gz"


def unzipped() -> bytes:
    with gzip.open(EXPORT) as handle:
        return handle.read()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[object], list[object]]:
    """What the wrapped log itself stores."""
    store = tmp_path_factory.mktemp("log") / "s.duckdb"
    report = ingest(store, MANAGED / "cloudsql18.log.gz")
    assert (report.log_format, report.plans, report.problem_count) == ("stderr", 62, 0)
    return stored(store)  # type: ignore[return-value]


def test_an_export_of_one_entry_per_line_reads_as_the_log(
    tmp_path: Path, reference: tuple[list[object], list[object]]
) -> None:
    entries = [json.loads(line) for line in unzipped().splitlines()]
    payloads = [e["textPayload"] for e in entries]
    assert sum(p.startswith("\t") for p in payloads) > 1000  # plan lines, an entry each
    assert max(len(p) for p in payloads) == 100_000  # the Query Text line, cut in two
    assert detect_format(unzipped()[:65536]) == "cloudsql"
    report = ingest(tmp_path / "s.duckdb", EXPORT)
    assert (report.log_format, report.plans, report.problem_count) == ("cloudsql", 62, 0)
    assert stored(tmp_path / "s.duckdb") == reference
    with Store(tmp_path / "s.duckdb", read_only=True) as store:
        (huge,) = [key for key, q in store.queries().items() if "$16000" in q.sql]
        (params,) = [r.row.params for r in store.log_observations() if r.row.query_key == huge]
    assert params.count(",") == 15999


def test_worker_processes_read_the_export_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    reference: tuple[list[object], list[object]],
) -> None:  # fmt: skip
    monkeypatch.setattr(autoexplain_log, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setattr(log_parallel, "CHUNK_BYTES", 16 << 10)
    plain = tmp_path / "export.json"
    plain.write_bytes(unzipped())  # workers read a plain file's chunks themselves
    ingest(tmp_path / "two.duckdb", plain, workers=2)
    assert stored(tmp_path / "two.duckdb") == reference


def test_a_grown_export_resumes_inside_an_entry(
    tmp_path: Path, reference: tuple[list[object], list[object]]
) -> None:
    """The export ends between the two entries of the cut Query Text line, then grows."""
    data = unzipped()
    piece = data.index(
        b'"textPayload":"\\t  \\"Query Text\\": \\"SELECT count(*) FROM items WHERE v IN'
    )
    cut = data.index(b"\n", piece) + 1
    export = tmp_path / "export.json"
    export.write_bytes(data[:cut])
    first = ingest(tmp_path / "s.duckdb", export)
    assert first.plans == 61 and first.incomplete
    export.write_bytes(data)
    second = ingest(tmp_path / "s.duckdb", export)
    assert second.plans == 1
    assert stored(tmp_path / "s.duckdb") == reference
