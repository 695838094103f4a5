"""Fuzzing `planshift ingest` with 320 logs mutated from logs real servers wrote
(tests/fixtures/logs): cut, bytes flipped, lines dropped, doubled or swapped, garbage and NULs
injected, re-encoded (Latin-1, UTF-16, CRLF, a byte-order mark), gzipped whole or cut. Every
run ends with exit 0 or 2 and no traceback; the store stays consistent and no run is left
running."""

from __future__ import annotations

import gzip
import random
from collections.abc import Callable
from pathlib import Path

from helpers import consistent
from typer.testing import CliRunner, Result

from detector.cli.app import app
from detector.store import Store

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
SOURCES = sorted(
    path
    for path in LOGS.rglob("*")
    if path.suffix in (".log", ".csv", ".json")
    and (path.stat().st_size < 100_000 or path.parent.name == "managed")  # RDS, CNPG, Cloud SQL
)
CASES = 320
PER_RUN = 8
PREFIX = "%m [%p] %q%u@%d qid=%Q "  # the captured logs' log_line_prefix

Mutation = Callable[[bytes, random.Random], bytes]


def _lines(data: bytes, rng: random.Random, edit: Callable[[list[bytes], int], object]) -> bytes:
    lines = data.splitlines(keepends=True) or [b""]
    for _ in range(rng.randrange(1, 8)):
        edit(lines, rng.randrange(len(lines)))
        if not lines:
            lines = [b""]
    return b"".join(lines)


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def flip(data: bytes, rng: random.Random) -> bytes:
    changed = bytearray(data)
    for _ in range(rng.randrange(1, 20)):
        if changed:
            changed[rng.randrange(len(changed))] = rng.randrange(256)
    return bytes(changed)


def drop(data: bytes, rng: random.Random) -> bytes:
    return _lines(data, rng, lambda lines, at: lines.pop(at))


def duplicate(data: bytes, rng: random.Random) -> bytes:
    return _lines(data, rng, lambda lines, at: lines.insert(at, lines[at]))


def swap(data: bytes, rng: random.Random) -> bytes:
    def edit(lines: list[bytes], at: int) -> None:
        other = rng.randrange(len(lines))
        lines[at], lines[other] = lines[other], lines[at]

    return _lines(data, rng, edit)


def garbage(data: bytes, rng: random.Random) -> bytes:
    def edit(lines: list[bytes], at: int) -> None:
        noise = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        lines.insert(at, noise + rng.choice([b"\n", b""]))

    return _lines(data, rng, edit)


def nul(data: bytes, rng: random.Random) -> bytes:
    return _lines(data, rng, lambda lines, at: lines.insert(at, b"\x00" * 30 + lines[at]))


def latin1(data: bytes, rng: random.Random) -> bytes:
    text = data.decode("utf-8", "replace").replace("t", "é", rng.randrange(1, 50))
    return text.encode("latin-1", "replace")


def utf16(data: bytes, rng: random.Random) -> bytes:
    return data.decode("utf-8", "replace").encode(rng.choice(["utf-16", "utf-16-le"]))


def crlf(data: bytes, rng: random.Random) -> bytes:
    return data.replace(b"\n", b"\r\n")


def bom(data: bytes, rng: random.Random) -> bytes:
    return b"\xef\xbb\xbf" + data


def month13(data: bytes, rng: random.Random) -> bytes:
    return data.replace(b"-11-2", b"-13-2", rng.randrange(1, 20))


def gzipped(data: bytes, rng: random.Random) -> bytes:
    packed = gzip.compress(data)
    choice = rng.randrange(4)
    if choice == 1:
        return packed[: rng.randrange(len(packed))]
    if choice == 2:
        return packed + flip(b"trailing garbage", rng)
    if choice == 3:
        return packed[:10] + flip(packed[10:], rng)
    return packed


MUTATIONS: tuple[Mutation, ...] = (
    truncate, flip, drop, duplicate, swap, garbage, nul, latin1, utf16, crlf, bom, month13,
    gzipped,
)  # fmt: skip


def mutated(rng: random.Random, source: Path) -> tuple[str, bytes]:
    data = source.read_bytes()
    steps = rng.sample(MUTATIONS, rng.randrange(1, 4))
    if gzipped in steps:  # compress last
        steps.remove(gzipped)
        steps.append(gzipped)
    for step in steps:
        data = step(data, rng)
    suffix = ".gz" if gzipped in steps else ""
    return f"{source.parent.name}-{source.name}{suffix}", data


def runs_left_running(store_path: Path) -> list[int]:
    with Store(store_path, read_only=True) as store:
        return [run.run_id for run in store.runs() if run.status == "running"]


def ingest(runner: CliRunner, logs: list[Path], store_path: Path, *extra: str) -> Result:
    result = runner.invoke(app, ["ingest", *map(str, logs), "--store", str(store_path), *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        logs,
        result.output,
    )
    assert result.exit_code in (0, 2) and "Traceback" not in result.output, result.output
    return result


def test_mutated_logs_never_break_the_ingest(tmp_path: Path) -> None:
    """Files go PER_RUN to a `planshift ingest` (a store open costs more than a small log);
    a file it refuses (exit 2, naming the file) leaves the run, and the rest go again."""
    assert len(SOURCES) >= 2 * PER_RUN
    rng = random.Random(13)
    runner = CliRunner()
    refused = stored = 0
    for group in range(CASES // PER_RUN):
        logs = []
        # distinct sources: a file whose start is another's is read as that file grown
        for case, source in enumerate(rng.sample(SOURCES, PER_RUN), start=group * PER_RUN):
            name, data = mutated(rng, source)
            logs.append(tmp_path / f"{case:03d}-{name}")
            logs[-1].write_bytes(data)
        store_path = tmp_path / f"store{group}.duckdb"
        extra = ["-j", "1"] + (["--log-line-prefix", PREFIX] if group % 5 == 4 else [])
        while logs:
            result = ingest(runner, logs, store_path, *extra)
            if result.exit_code == 0:
                stored += len(logs)
                break
            error = result.output[result.output.find("error: ") :].replace("\n", "")
            named = [log for log in logs if str(log) in error]
            assert named, result.output  # exit 2 names the file it refuses
            refused += len(named)
            logs = [log for log in logs if log not in named]
        if store_path.exists():
            consistent(store_path)
            assert runs_left_running(store_path) == []
        if group % 4 == 3 and logs:
            again = ingest(runner, logs, store_path, *extra)
            assert again.exit_code == 0 and "0 plans from" in again.output, again.output
            consistent(store_path)
    assert stored + refused == CASES and stored > CASES // 2 and refused > 0
