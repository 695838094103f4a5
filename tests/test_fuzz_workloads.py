"""Generated hostile workload files through `planshift run` on a real server: exit 0, 1 or 2,
never a traceback, the server's table intact, and every run either complete or marked failed."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import duckdb
import psycopg
from helpers import FreshDb
from typer.testing import CliRunner

from collectors.servers.embedded import EmbeddedCluster
from detector.cli.app import app

CASES = 220
HOSTILE_SQL = [
    "SELECT 1; COMMIT; DELETE FROM t",
    "SELECT 1; COMMIT; SET random_page_cost = '1000'",
    "SELECT 1; PREPARE p AS SELECT 1",
    "DELETE FROM t",
    "UPDATE t SET v = 0",
    "TRUNCATE t",
    "DROP TABLE t",
    "COMMIT",
    "ROLLBACK",
    "SELECT pg_advisory_lock(7)",
    "SELECT set_config('enable_seqscan', 'off', false)",
    "SELECT count(*) FROM t WHERE s LIKE 'PROMO%'",
    "SELECT count(*) FROM t WHERE v % 7 = 0",
    "SELECT count(*) FROM t WHERE id = %(id)s",
    "SELECT count(*) FROM t WHERE id = %(nope)s",
    "SELECT 'Zürich', '\u202e', E'\\\\x1b[2J' FROM t LIMIT 1",
    "SELECT * FROM missing_table",
    "SELECT $1",
    "SELEC broken",
    "SELECT pg_sleep(0.01)",
    "WITH d AS (DELETE FROM t RETURNING *) SELECT count(*) FROM d",
    "SELECT count(*) FROM t t1 JOIN t t2 USING (v) WHERE t1.id < 50",
    "",
    ";",
    "-- only a comment",
]
NAMES = ["q", "[/]", "[bold red]x", "\x1b]0;title\x07", "a" * 300, "名前", "q", " ", "x\ny"]
KEYS = ["repetitions", "repetitons", "warmup", "seed", "prime", "name", "sql", "params", "bogus"]
VALUES: list[Any] = [-1, 0, 1, 3, 2**40, "3", 1.5, True, [], {}, {"range": [5, 1]}, None]


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


def hostile_workload(rng: random.Random) -> str:
    """Mostly well-formed files with hostile names and SQL; one in three also breaks the schema."""
    broken = rng.random() < 0.35

    def maybe(chance: float) -> bool:
        return broken and rng.random() < chance

    lines = ["[workload]", f"name = {json.dumps(rng.choice(NAMES))}"]
    lines.append(f"repetitions = {toml_value(rng.choice([0, -1, '2']) if maybe(0.3) else 1)}")
    lines.append("warmup = 0")
    if maybe(0.3):
        lines.append(f"{rng.choice(KEYS)} = {toml_value(rng.choice(VALUES[:-1]))}")
    if rng.random() < 0.3:
        lines += ["[setup]", f"sql = {json.dumps(rng.choice(HOSTILE_SQL))}"]
        if rng.random() < 0.5:
            lines.append(f"on_dsn = {json.dumps(rng.choice(['run', 'check', 'yes']))}")
    for name in ("a", "b")[: rng.randint(0, 2)]:
        lines += [
            f"[variants.{name}]",
            f"random_page_cost = {json.dumps(rng.choice(['4', '1.1']))}",
        ]
        if maybe(0.4):
            setting = rng.choice(["work_mem", "bad name", "setings"])
            lines.append(f"{json.dumps(setting)} = {toml_value(rng.choice(VALUES[:8]))}")
    for index in range(rng.randint(1, 3)):
        name = rng.choice(NAMES) + ("" if maybe(0.3) else str(index))
        lines += ["[[queries]]", f"name = {json.dumps(name)}"]
        lines.append(f"sql = {json.dumps(rng.choice(HOSTILE_SQL))}")
        if "%(id)s" in lines[-1] or maybe(0.3):
            generator = rng.choice([{"choice": []}, 5]) if maybe(0.5) else {"range": [1, 1000]}
            lines.append(f"params = {{ id = {toml_value(generator)} }}")
        if maybe(0.3):
            key = rng.choice(["repetitions", "repetitons", "warmup", "bogus", "generic_plan"])
            lines.append(f"{key} = {toml_value(rng.choice(VALUES[:-1]))}")
    if maybe(0.2):
        lines.append(
            rng.choice(["[[targets]]\nname = 'x'", "[bogus]", "garbage = ", "[[queries]]\nname=1"])
        )
    return "\n".join(lines) + "\n"


def test_hostile_workloads_exit_0_1_or_2_and_leave_the_server_and_store_sound(
    tmp_path: Path, pg15: EmbeddedCluster, fresh_db: FreshDb
) -> None:
    conninfo = fresh_db(pg15)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v int, s text)")
        conn.execute(
            "INSERT INTO t SELECT i, i % 100, 'PROMO' || i FROM generate_series(1, 1000) i"
        )
        conn.execute("ANALYZE t")
    runner = CliRunner()
    store = tmp_path / "fuzz.duckdb"
    rng = random.Random(20261124)
    codes: dict[int, int] = {}
    for case in range(CASES):
        path = tmp_path / f"w{case}.toml"
        path.write_text(hostile_workload(rng))
        result = runner.invoke(
            app,
            [
                "run",
                str(path),
                "--dsn",
                f"local={conninfo}",
                "--store",
                str(store),
                "--warmup",
                "0",
            ],
        )
        assert not isinstance(result.exception, Exception) or isinstance(
            result.exception, SystemExit
        ), f"case {case}: {result.exception!r}\n{path.read_text()}"
        assert result.exit_code in (0, 1, 2), (
            f"case {case}: exit {result.exit_code}\n{result.output}"
        )
        assert "Traceback" not in result.output
        codes[result.exit_code] = codes.get(result.exit_code, 0) + 1
    assert codes.get(0, 0) > 10 and codes.get(2, 0) > 50, codes  # both paths were exercised
    with psycopg.connect(conninfo) as conn:
        assert conn.execute("SELECT count(*), sum(v) FROM t").fetchone() == (1000, 49500)
    with duckdb.connect(str(store), read_only=True) as db:
        statuses = {row[0] for row in db.execute("SELECT status FROM runs").fetchall()}
    assert statuses <= {"complete", "failed"}
