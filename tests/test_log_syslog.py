"""syslog logs (log_destination = syslog) from a real server through a real rsyslogd
(tests/fixtures/logs/syslog, see capture_syslog.py): the same run was logged to stderr too, so
each syslog file must read exactly as that stderr log: plans, their lines over PostgreSQL's
900-byte syslog limit, the DETAIL/STATEMENT lines of an error, and the server events."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_log_managed import ingest, stored
from typer.testing import CliRunner

from collectors.logs import autoexplain as autoexplain_log
from collectors.logs import parallel as log_parallel
from collectors.logs.registry import detect_format
from detector.cli.app import app
from detector.store import Store

SYSLOG = Path(__file__).resolve().parent / "fixtures" / "logs" / "syslog"
FILES = ("traditional.log", "iso.log")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[object], list[object]]:
    """What the same run's stderr log stores."""
    store = tmp_path_factory.mktemp("stderr") / "s.duckdb"
    report = ingest(store, SYSLOG / "stderr.log")
    assert report.problem_count == 0 and report.plans == 66
    return stored(store)  # type: ignore[return-value]


@pytest.mark.parametrize("name", FILES)
def test_syslog_reads_as_the_stderr_log_of_the_same_run(
    name: str, tmp_path: Path, reference: tuple[list[object], list[object]]
) -> None:
    assert detect_format((SYSLOG / name).read_bytes()[:65536]) == "syslog"
    report = ingest(tmp_path / "s.duckdb", SYSLOG / name)
    assert (report.log_format, report.plans, report.problem_count) == ("syslog", 66, 0)
    assert stored(tmp_path / "s.duckdb") == reference
    with Store(tmp_path / "s.duckdb", read_only=True) as store:
        (long,) = [key for key, q in store.queries().items() if "$300" in q.sql]
        params = [r.row.params for r in store.log_observations() if r.row.query_key == long]
    assert len(params) == 2  # Query Text cut in 900-byte pieces, put back
    assert all(p.count(",") == 299 for p in params)


@pytest.mark.parametrize("name", FILES)
def test_worker_processes_read_syslog_the_same(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    reference: tuple[list[object], list[object]],
) -> None:  # fmt: skip
    monkeypatch.setattr(autoexplain_log, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setattr(log_parallel, "CHUNK_BYTES", 8 << 10)
    ingest(tmp_path / "two.duckdb", SYSLOG / name, workers=2)
    assert stored(tmp_path / "two.duckdb") == reference


def test_a_grown_syslog_file_resumes_inside_a_message(
    tmp_path: Path, reference: tuple[list[object], list[object]]
) -> None:
    """The file ends between two records of a JSON plan, then grows: nothing lost or twice."""
    data = (SYSLOG / "traditional.log").read_bytes()
    cut = data.index(b']: [7-3] #011  "Query Text": "SELECT count(*) FROM items WHERE v IN')
    cut = data.rindex(b"\n", 0, cut) + 1
    log = tmp_path / "postgresql.log"
    log.write_bytes(data[:cut])
    first = ingest(tmp_path / "s.duckdb", log)
    assert first.incomplete and first.plans < 66
    log.write_bytes(data)
    second = ingest(tmp_path / "s.duckdb", log)
    assert first.plans + second.plans == 66
    assert stored(tmp_path / "s.duckdb") == reference


def test_the_timeline_of_a_syslog_names_the_reload(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    runner = CliRunner()
    done = runner.invoke(app, ["ingest", str(SYSLOG / "iso.log"), "--store", str(store)])
    assert done.exit_code == 0, done.output
    assert "iso.log: syslog: " in done.output and "66 plans stored" in done.output
    shown = runner.invoke(app, ["timeline", "--store", str(store), "--query", "items WHERE v <"])
    flip = next(line for line in shown.output.splitlines() if ">> FLIP" in line)
    assert 'after: parameter "random_page_cost" changed to "60" at ' in flip
