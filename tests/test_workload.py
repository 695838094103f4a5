from __future__ import annotations

import random
from pathlib import Path

import pytest

from detector.errors import PlanshiftError
from detector.jobs.workload import load_workload

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

VALID = """
[workload]
name = "w"
repetitions = 4
warmup = 1

[setup]
sql = "CREATE TABLE t (a int); INSERT INTO t SELECT generate_series(1, 10); VACUUM ANALYZE t"

[variants.a]
work_mem = "4MB"
[variants.b]
work_mem = "64MB"
enable_bitmapscan = false

[[queries]]
name = "q"
sql = "SELECT * FROM t WHERE a BETWEEN %(lo)s AND %(lo)s + %(len)s;"
params = { lo = { range = [1, 5] }, len = { choice = [1, 2] } }

[[queries]]
name = "swept"
sql = "SELECT * FROM t WHERE a < %(n)s"
sweep = { param = "n", values = [2, 5, 8] }
"""


def write(tmp_path: Path, text: str, name: str = "workload.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_valid_workload_is_parsed(tmp_path: Path) -> None:
    workload = load_workload(write(tmp_path, VALID))
    assert workload.name == "w"
    assert workload.repetitions == 4 and workload.warmup == 1
    assert workload.setup == (
        "CREATE TABLE t (a int)",
        "INSERT INTO t SELECT generate_series(1, 10)",
        "VACUUM ANALYZE t",
    )
    assert workload.variants == {
        "a": {"work_mem": "4MB"},
        "b": {"work_mem": "64MB", "enable_bitmapscan": "off"},
    }
    query = workload.query("q")
    assert not query.sql.endswith(";")
    rng = random.Random(1)
    for index in range(50):
        params = query.parameters(rng, index, {})
        assert 1 <= params["lo"] <= 5 and params["len"] in (1, 2)
    swept = workload.query("swept")
    assert [label for label, _ in swept.points()] == ["n=2", "n=5", "n=8"]
    assert swept.parameters(rng, 0, {"n": 5}) == {"n": 5}


def test_parameters_are_reproducible_for_a_seed(tmp_path: Path) -> None:
    query = load_workload(write(tmp_path, VALID)).query("q")
    first = [query.parameters(random.Random("s"), i, {}) for i in range(10)]
    second = [query.parameters(random.Random("s"), i, {}) for i in range(10)]
    assert first == second


def test_values_generator_cycles_in_order(tmp_path: Path) -> None:
    text = VALID.replace("{ choice = [1, 2] }", "{ values = [10, 20, 30] }")
    query = load_workload(write(tmp_path, text)).query("q")
    rng = random.Random(0)
    assert [query.parameters(rng, i, {})["len"] for i in range(4)] == [10, 20, 30, 10]


def test_without_variants_there_is_one_default_variant(tmp_path: Path) -> None:
    text = VALID.split("[variants.a]")[0] + VALID.split("enable_bitmapscan = false\n")[1]
    assert load_workload(write(tmp_path, text)).variants == {"default": {}}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda t: t + '\n[[queries]]\nname = "q"\nsql = "SELECT 1"\n',
            "queries[2].name: duplicate query name 'q'",
        ),
        (lambda t: t.replace("range = [1, 5]", "range = [5, 1]"), "queries[0].params.lo.range"),
        (
            lambda t: t.replace("range = [1, 5]", "between = [1, 5]"),
            "queries[0].params.lo: unknown generator",
        ),
        (
            lambda t: t.replace("{ choice = [1, 2] }", "{ choice = [] }"),
            "queries[0].params.len.choice: expected a non-empty list",
        ),
        (
            lambda t: t.replace("%(len)s", "%(length)s"),
            "queries[0].sql: placeholder %(length)s has no generator",
        ),
        (
            lambda t: t.replace("repetitions = 4", "repetitions = -1"),
            "workload.repetitions: expected a positive integer",
        ),
        (
            lambda t: t.replace("repetitions = 4", "repetitions = 0"),
            "workload.repetitions: expected a positive integer",
        ),
        (
            lambda t: t.replace("warmup = 1", "warmup = -1"),
            "workload.warmup: expected a non-negative integer",
        ),
        (
            lambda t: t.replace("repetitions = 4", "repetitons = 3"),
            "workload.repetitons: unknown key",
        ),
        (
            lambda t: t.replace('name = "swept"', 'name = "swept"\nrepetiton = 2'),
            "queries[1].repetiton: unknown key",
        ),
        (
            lambda t: t.replace('sweep = { param = "n",', 'sweep = { parm = "n", param = "n",'),
            "queries[1].sweep.parm: unknown key",
        ),
        (
            lambda t: (
                t + '\n[[targets]]\nname = "x"\npostgres = "15"\nsetings = { work_mem = "1MB" }\n'
            ),
            "targets[0].setings: unknown key",
        ),
        (lambda t: t.replace("[setup]", '[setup]\non_dns = "run"'), "setup.on_dns: unknown key"),
        (lambda t: t.replace("[setup]", '[setup]\non_dsn = "yes"'), "setup.on_dsn: expected"),
        (
            lambda t: t.replace("[variants.a]", "[variants]\na = 1\n[variants.c]"),
            "variants.a: expected a table",
        ),
        (lambda t: t.replace('work_mem = "4MB"', '"work mem" = "4MB"'), "not a setting name"),
        (lambda t: t.replace('name = "w"', "name = 5"), "workload.name: expected a string"),
        (
            lambda t: t.replace(
                'sql = "SELECT * FROM t WHERE a < %(n)s"',
                'sql = "SELECT * FROM t WHERE a < %(n)s; COMMIT; DELETE FROM t"',
            ),
            "queries[1].sql: 3 statements in one query",
        ),
        (lambda t: t.replace("[setup]", "[setpu]"), "setpu: unknown section"),
        (
            lambda t: t.replace("VACUUM ANALYZE t", "VACUUM ANALYZE t WHERE"),
            "setup.sql: SQL syntax error",
        ),
        (
            lambda t: t.replace('work_mem = "4MB"', "work_mem = [1]"),
            "variants.a.work_mem: a setting value must be a scalar",
        ),
        (
            lambda t: t.replace('sql = "SELECT * FROM t WHERE a < %(n)s"', ""),
            "queries[1].sql: missing or empty",
        ),
        (lambda t: t.replace("values = [2, 5, 8]", "values = []"), "queries[1].sweep: needs param"),
        (
            lambda t: t.replace("repetitions = 4", "repetitions = 1000000000"),
            "workload.repetitions: 1000000000 is more than 10,000",
        ),
        (
            lambda t: t.replace("warmup = 1", "warmup = 100000"),
            "workload.warmup: 100000 is more than 1,000",
        ),
        (
            lambda t: t.replace('name = "swept"', 'name = "swept"\nrepetitions = 20000'),
            "queries[1].repetitions: 20000 is more than 10,000",
        ),
        (
            lambda t: t.replace("values = [2, 5, 8]", f"values = {list(range(1001))}"),
            "queries[1].sweep.values: 1001 points, at most 1,000",
        ),
        (
            lambda t: t + '\n[[targets]]\nname = "prod"\ndsn = "postgresql://u:secret@h/db"\n',
            "targets[0].dsn: DSNs do not belong",
        ),
        (lambda t: t + '\n[[targets]]\nname = "x"\n', "targets[0]: give exactly one of"),
        (lambda t: t.replace("[[queries]]", "[[querys]]"), "querys: unknown section"),
        (lambda t: t.replace('name = "w"', 'name = "w'), "not valid TOML"),
    ],
)
def test_bad_workloads_name_the_file_and_key(tmp_path: Path, change, expected: str) -> None:  # type: ignore[no-untyped-def]
    path = write(tmp_path, change(VALID), "bad.toml")
    with pytest.raises(PlanshiftError) as info:
        load_workload(path)
    assert info.value.message.startswith("bad.toml: ")
    assert expected in info.value.message


def test_unknown_keys_suggest_the_closest_known_one(tmp_path: Path) -> None:
    path = write(tmp_path, VALID.replace("repetitions = 4", "repetitons = 3"))
    with pytest.raises(PlanshiftError) as info:
        load_workload(path)
    assert "did you mean 'repetitions'?" in (info.value.hint or "")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PlanshiftError, match="cannot read workload file"):
        load_workload(tmp_path / "nope.toml")


def test_shipped_examples_load() -> None:
    paths = sorted(EXAMPLES.glob("*/workload.toml"))
    assert paths, "examples/ has workloads"
    for path in paths:
        workload = load_workload(path)
        assert workload.queries


def test_a_target_may_bring_setup_of_its_own(tmp_path: Path) -> None:
    text = (
        VALID
        + '\n[[targets]]\nname = "churned"\npostgres = "15"\nsetup = "UPDATE t SET a = a; ANALYZE t"\n'
    )
    workload = load_workload(write(tmp_path, text))
    assert workload.targets[0].setup == ("UPDATE t SET a = a", "ANALYZE t")
    bad = text.replace('setup = "UPDATE t SET a = a; ANALYZE t"', 'setup = "UPDATE t SET"')
    with pytest.raises(PlanshiftError, match=r"targets\[0\].setup: SQL syntax error"):
        load_workload(write(tmp_path, bad, "bad.toml"))
