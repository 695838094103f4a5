"""The parallel ingest (worker processes over chunks cut at entry boundaries) stores exactly
what the sequential reader stores: rows, problems with their lines, and the ledger. Chunks are
made tiny so that every log is cut in many places, inside interleaved plans too."""

from __future__ import annotations

import gzip
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import consistent, contents, corrupt, ingest_with, json_entries, with_pid

from collectors.logs import autoexplain as autoexplain_log
from collectors.logs import parallel as log_parallel
from detector.errors import PlanshiftError

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "logs"))

pytestmark = pytest.mark.pg


def woven(entries: list[bytes]) -> bytes:
    """Plans interleaved with other backends' lines, as stderr logs without a collector show."""
    pieces = []
    for number, entry in enumerate(entries[:40]):
        lines = entry.splitlines(keepends=True)
        other = with_pid(entries[(number + 1) % len(entries)], 7000 + number)
        cut = len(lines) // 2
        pieces += [*lines[:cut], other, *lines[cut:]]
    return b"".join(pieces)


@pytest.mark.parametrize(
    "name", ["pg.log", "pg.csv", "pg.json", "woven.log", "broken.log", "pg.log.gz", "grown.log"]
)
def test_parallel_ingest_stores_what_the_sequential_one_does(
    live_logs: Callable[[int], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    logs = live_logs(17)
    if name == "woven.log":
        (tmp_path / name).write_bytes(woven(json_entries(logs)))
    elif name == "broken.log":
        original = (logs / "pg.log").read_bytes()
        (tmp_path / name).write_bytes(corrupt(original, random.Random(5), operations=12))
    elif name == "pg.log.gz":
        (tmp_path / name).write_bytes(gzip.compress((logs / "pg.log").read_bytes()))
    elif name == "grown.log":  # a first ingest stops mid-file, the next resumes there
        data = (logs / "pg.log").read_bytes()
        (tmp_path / name).write_bytes(data[: data.index(b"\n20", len(data) // 2) + 1])
    else:
        (tmp_path / name).write_bytes((logs / name).read_bytes())
    log = tmp_path / name
    monkeypatch.setattr(autoexplain_log, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setattr(log_parallel, "CHUNK_BYTES", 3000)
    monkeypatch.setattr(log_parallel, "TAIL_SEARCH", 500)
    fallbacks: list[int] = []
    next_result = log_parallel.ParallelRead._next

    def spy(self: log_parallel.ParallelRead, pending: Any) -> Any:
        result, start = next_result(self, pending)
        if result is None:
            fallbacks.append(start.offset)
        return result, start

    monkeypatch.setattr(log_parallel.ParallelRead, "_next", spy)
    if name == "grown.log":
        for store, workers in (("sequential", 0), ("parallel", 2)):
            ingest_with(tmp_path / f"{store}.duckdb", log, workers=workers)
        log.write_bytes((logs / "pg.log").read_bytes())
    sequential = ingest_with(tmp_path / "sequential.duckdb", log, workers=0)
    parallel = ingest_with(tmp_path / "parallel.duckdb", log, workers=2)
    # interleaved plans cut by a chunk end send the rest of the file to the sequential reader
    assert bool(fallbacks) == (name == "woven.log"), [
        log.read_bytes()[o - 300 : o + 300] for o in fallbacks[:1]
    ]
    assert parallel.plans == sequential.plans > 0
    assert parallel.problem_count == sequential.problem_count
    assert contents(tmp_path / "parallel.duckdb") == contents(tmp_path / "sequential.duckdb")
    consistent(tmp_path / "parallel.duckdb")
    again = ingest_with(tmp_path / "parallel.duckdb", log, workers=2)
    assert again.plans == 0 and again.problem_count == 0


def die(*_: Any) -> None:
    """A worker that crashes (run in the worker process instead of parse_chunk)."""
    os._exit(3)


def test_a_dying_worker_is_a_clear_error_and_stores_nothing(
    live_logs: Callable[[int], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "pg.log"
    log.write_bytes((live_logs(17) / "pg.log").read_bytes())
    monkeypatch.setattr(autoexplain_log, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setattr(log_parallel, "CHUNK_BYTES", 3000)
    monkeypatch.setattr(log_parallel, "parse_chunk", die)
    monkeypatch.setattr(log_parallel, "STARTUP_CHUNKS", 0)  # every chunk goes to a worker
    with pytest.raises(PlanshiftError, match="died") as raised:
        ingest_with(tmp_path / "s.duckdb", log, workers=2)
    assert raised.value.hint is not None and "--jobs 1" in raised.value.hint
    assert consistent(tmp_path / "s.duckdb") == (0, 0)


def test_a_chunk_that_cannot_be_read_is_read_sequentially(
    live_logs: Callable[[int], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker reads its chunk from the file; when that fails (the path names another file
    now), the ingest goes on sequentially from that chunk and stores the same."""
    log = tmp_path / "pg.log"
    log.write_bytes((live_logs(17) / "pg.log").read_bytes())
    monkeypatch.setattr(autoexplain_log, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setattr(log_parallel, "CHUNK_BYTES", 3000)
    reads: list[int] = []
    read_chunk = log_parallel.read_chunk

    def second_fails(spec: Any, offset: int, length: int) -> bytes | None:
        reads.append(offset)  # chunks parsed here, while the workers start
        return read_chunk(spec, offset, length) if len(reads) == 1 else None

    monkeypatch.setattr(log_parallel, "read_chunk", second_fails)
    sequential = ingest_with(tmp_path / "sequential.duckdb", log, workers=0)
    parallel = ingest_with(tmp_path / "parallel.duckdb", log, workers=2)
    assert len(reads) == 2 and reads[1] > 0
    assert parallel.plans == sequential.plans > 0
    assert contents(tmp_path / "parallel.duckdb") == contents(tmp_path / "sequential.duckdb")
    consistent(tmp_path / "parallel.duckdb")
