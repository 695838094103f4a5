"""The text side of `planshift capture`: parameter values read back from logged SQL, and the
workload file it writes, read by the strict loader (no server needed)."""

from __future__ import annotations

import os
import random
import re
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collectors.capture.constants import generic_text, literal_params
from collectors.capture.dump import open_private
from collectors.capture.params import Reservoir, aligned_values, literal
from collectors.capture.plan_values import plan_values
from collectors.capture.relations import functions_read, relations_of
from collectors.capture.workload_statements import classify, own_statement_keys
from detector.cli.app import app
from detector.errors import PlanshiftError
from detector.jobs.capture import private_directory
from detector.jobs.capture_toml import CapturedQuery, placeholder_sql, query_name, workload_toml
from detector.jobs.workload import load_workload

NORMALIZED = "SELECT * FROM t WHERE a = $1 AND b = $2 AND c = $3 LIMIT $4"


@pytest.mark.parametrize(
    ("logged", "bound", "expected"),
    [
        # simple protocol: the constants of the text, a sign included, `;` ignored
        (
            "select * from t where a = -5 and b = 'it''s' and c = 2.5 limit 10;",
            {},
            {1: -5, 2: "it's", 3: 2.5, 4: 10},
        ),
        # extended protocol (16+): `Query Parameters`, and a constant among parameters
        (
            "SELECT * FROM t WHERE a = $1 AND b = $2 AND c = $3 LIMIT 5",
            {1: "7", 2: "x", 3: "0.1"},
            {1: "7", 2: "x", 3: "0.1", 4: 5},
        ),
        ("SELECT * FROM t WHERE a = $1 AND b = $2 AND c = $3 LIMIT 5", {}, None),  # 15: unbound
        ("SELECT * FROM t WHERE a = 1 AND b = 2 AND c = 3", {}, None),  # another statement
        ("SELECT * FROM t WHERE a = 1 AND b = 2 AND c = 3 LIMIT 4 OFFSET 1", {}, None),
        ("SELECT * FROM t WHERE a = 1 AND b = E'\\n' AND c = 3 LIMIT 4", {}, None),  # unreadable
    ],
)
def test_values_are_read_back_only_when_the_texts_line_up(
    logged: str, bound: dict[int, str], expected: dict[int, object] | None
) -> None:
    assert aligned_values(NORMALIZED, logged, bound) == expected


def test_pg18_squashed_in_lists_give_no_values() -> None:
    assert (
        aligned_values(
            "SELECT 1 FROM t WHERE a IN ($1 /*, ... */)", "SELECT 1 FROM t WHERE a IN (1, 2)", {}
        )
        is None
    )


def test_literals() -> None:
    assert literal("0x1F", "ICONST") == 31 and literal("007", "ICONST") == 7
    assert literal("1.50", "FCONST") == "1.50" and literal("1.5", "FCONST") == 1.5
    assert literal("$q$a'b$q$", "SCONST") == "a'b"


def test_statements_are_classified_by_the_parser() -> None:
    kinds = {
        "SELECT abalance FROM pgbench_accounts WHERE aid = $1": "query",
        "UPDATE t SET a = $1": "write",
        "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d": "write",
        "SELECT * INTO t2 FROM t": "write",
        "BEGIN": "utility",
        "<insufficient privilege>": "hidden",
        "SELEKT 1": "unparsable",
        "SELECT 1 FROM t WHERE a IN ($1 /*, ... */)": "squashed",
    }
    assert {sql: classify(1, sql, 1, 1.0).kind for sql in kinds} == kinds
    assert relations_of("WITH c AS (SELECT 1) SELECT * FROM c, s.t JOIN u USING (id)") == [
        ("s.t", False),
        ("u", False),
    ]


def test_planshift_statements_and_excluded_ones_are_not_the_application() -> None:
    pgss = "SELECT queryid, calls, query FROM public.pg_stat_statements WHERE queryid IS NOT NULL"
    own = own_statement_keys(pgss)
    # as a snapshot from a session with pg_stat_statements on its search_path sent it
    sent = "SELECT queryid, calls, query FROM pg_stat_statements WHERE queryid IS NOT NULL"
    assert classify(1, sent, 1, 1.0, own=own).kind == "planshift"
    for wrapped in (  # its plan check, a run's measured and generic plans
        "EXPLAIN (FORMAT JSON) SELECT * FROM t WHERE a = $1",
        "EXPLAIN (ANALYZE, TIMING OFF, BUFFERS, SETTINGS, FORMAT JSON) SELECT 1 FROM t",
        "PREPARE planshift_generic AS SELECT * FROM t WHERE a = $1",
    ):
        assert classify(5, wrapped, 1, 1.0).kind == "planshift", wrapped
    assert classify(6, "EXPLAIN SELECT * FROM t", 1, 1.0).kind == "utility"  # somebody else's
    catalog = "SELECT name, c.relpersistence FROM unnest($1::text[]) AS name"
    assert classify(2, catalog, 1, 1.0, own=own).kind == "query"  # not one of planshift's
    audit = [re.compile("from audit_", re.IGNORECASE)]
    excluded = classify(3, "SELECT * FROM audit_log WHERE id = $1", 1, 1.0, exclude=audit)
    assert (excluded.kind, excluded.reason) == ("excluded", "--exclude 'from audit_'")
    assert classify(4, "SELECT * FROM orders", 1, 1.0, exclude=audit).kind == "query"
    assert functions_read("SELECT * FROM pg_stat_statements(true) s, t") == ["pg_stat_statements"]


@pytest.mark.parametrize(
    ("normalized", "generic", "numbers"),
    [
        # as pg_stat_statements 14-18 show them: PostgreSQL's parser refuses each $n here
        (
            "SELECT extract($1 FROM o_orderdate) AS y FROM orders",
            "SELECT pg_catalog.extract($1::text, o_orderdate) AS y FROM orders",
            [1],
        ),
        (
            "SELECT 1 FROM o WHERE d >= date $1 AND d < date $2 + interval $3 month",
            "SELECT 1 FROM o WHERE d >= CAST($1 AS date) AND d < CAST($2 AS date) + "
            "CAST($3 AS interval month)",
            [1, 2, 3],
        ),
        (
            "SELECT 1 FROM o WHERE ts > timestamp(3) $1 AND ts > timestamp with time zone $2 "
            "AND i < interval $3 day to second (2)",
            "SELECT 1 FROM o WHERE ts > CAST($1 AS timestamp(3)) AND ts > CAST($2 AS timestamp "
            "with time zone) AND i < CAST($3 AS interval day to second (2))",
            [1, 2, 3],
        ),
        # parameters the server parses stay as they are
        ("SELECT 1 FROM o WHERE d > $1::date AND extract(year FROM d) = $2", None, []),
        ("SELECT substring($1 from $2 for $3) FROM o", None, []),
    ],
)
def test_typed_and_keyword_constants_are_written_so_the_server_parses_them(
    normalized: str, generic: str | None, numbers: list[int]
) -> None:
    assert generic_text(normalized) == (generic or normalized)
    assert literal_params(normalized) == numbers


def test_typed_and_keyword_constants_are_read_back_from_the_logged_text() -> None:
    normalized = (
        "SELECT extract($1 FROM d), count(*) FROM o WHERE d >= date $2 "
        "AND d < date $3 + interval $4 month AND flag = $5 GROUP BY 1"
    )
    logged = (
        "select extract(year from d), count(*) from o where d >= date '1995-01-01' "
        "and d < date '1995-01-01' + interval '3' month and flag = true group by 1;"
    )
    assert aligned_values(normalized, logged, {}) == {
        1: "year", 2: "1995-01-01", 3: "1995-01-01", 4: "3", 5: "true"
    }  # fmt: skip
    other = aligned_values(normalized, logged.replace("(year", "(dow"), {})
    assert other is not None and other[1] == "dow"


def test_the_written_workload_reads_back_with_awkward_values(tmp_path: Path) -> None:
    sql = "SELECT a % 2, '''' FROM t WHERE b = $1 AND c = $2 AND d = $3"
    samples = (
        {1: "quote ' and \"double\" and '''", 2: 2**70, 3: "tab\tDEL\x7f é"},
        {1: "line\nbreak", 2: -3, 3: 0.25},
    )
    taken: set[str] = set()
    queries = [
        CapturedQuery(query_name(["t"], "ab12cd34", taken), sql, (1, 2), 1000, 0.5, 500.0, samples),
        CapturedQuery(query_name(["s.t"], "ab12cd34", taken), sql, (3,), 10, 2.0, 20.0, ()),
        CapturedQuery(query_name([], "text:0f", taken), "select 1", (4,), 3, 0.1, 0.3, ()),
    ]
    text = workload_toml(
        name="capture-x",
        header=["from somewhere"],
        setup_files=["schema.sql"],
        queries=queries,
        not_captured=["write: UPDATE t SET a = $1 (5 calls): writes"],
    )
    (tmp_path / "schema.sql").write_text("CREATE TABLE t (a int, b text, c numeric, d text);\n")
    (tmp_path / "workload.toml").write_text(text)
    workload = load_workload(tmp_path / "workload.toml")
    first, generic, plain = workload.queries
    assert [q.name for q in workload.queries] == ["t_12cd34", "t_12cd34_2", "expression_0f"]
    assert first.sql == "SELECT a %% 2, '''' FROM t WHERE b = %(p1)s AND c = %(p2)s AND d = %(p3)s"
    assert [p.args for p in first.params] == [
        (samples[0][1], samples[1][1]),
        (str(2**70), -3),  # beyond 64 bits: text, as TOML holds no larger integer
        (samples[0][3], 0.25),
    ]
    assert (first.calls, first.mean_ms) == (1000, 0.5)
    assert generic.generic_plan and generic.sql == sql and not generic.params
    assert not plain.generic_plan and plain.sql == "select 1" and not plain.placeholders
    assert "# not captured:" in text and placeholder_sql("a % $1") == "a %% %(p1)s"


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ("calls = -1", "queries[0].calls"),
        ("calls = 1.5", "queries[0].calls"),
        ("mean_ms = 'fast'", "queries[0].mean_ms"),
        ("mean_ms = true", "queries[0].mean_ms"),
    ],
)
def test_weights_are_checked(tmp_path: Path, extra: str, problem: str) -> None:
    path = tmp_path / "w.toml"
    path.write_text(f"[[queries]]\nname = 'q'\nsql = 'SELECT 1'\n{extra}\n")
    with pytest.raises(PlanshiftError, match=re.escape(problem)):
        load_workload(path)


def test_plan_only_timing_takes_no_cold_trial(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text(
        "[workload]\ntiming = 'plan'\ncache = 'cold'\n[[queries]]\nname = 'q'\nsql = 'SELECT 1'\n"
    )
    with pytest.raises(PlanshiftError, match="executes nothing"):
        load_workload(path)
    path.write_text("[workload]\ntiming = 'plan'\n[[queries]]\nname = 'q'\nsql = 'SELECT 1'\n")
    assert load_workload(path).timing == "plan"


def test_parameter_samples_come_from_the_whole_log_in_log_order() -> None:
    def drawn(seed: str) -> list[int]:
        reservoir = Reservoir(5, random.Random(seed))
        for i in range(1000):
            reservoir.offer({1: i})
        return [sample[1] for sample in reservoir.drawn()]

    kept = drawn("a")
    assert len(kept) == 5 and kept == sorted(kept) and kept == drawn("a")
    assert kept[-1] >= 5  # not merely the first five lines of the log


def test_bad_options_are_user_errors(tmp_path: Path) -> None:
    taken = tmp_path / "a-file"
    taken.write_text("")
    runs = {
        "cannot write to": ["-o", str(taken)],
        "expected positive numbers": ["-o", str(tmp_path / "d"), "--samples", "0"],
        "no such log file": ["-o", str(tmp_path / "d"), "--log", str(tmp_path / "none.log")],
    }
    for problem, options in runs.items():
        result = CliRunner().invoke(app, ["capture", "--target", "host=/nonexistent", *options])
        assert result.exit_code == 2 and problem in result.output, result.output


def test_values_from_the_conditions_of_a_custom_plan() -> None:
    sql = "SELECT * FROM a x WHERE x.k = $1 AND v BETWEEN $2 AND $3 AND $4 < w AND s <> $5::text"
    custom = {
        "Plan": {
            "Node Type": "Nested Loop",
            "Plans": [
                {"Index Cond": "((x.k = 42) AND (v >= '-1.5'::numeric) AND (v <= 9.25))"},
                {"Filter": "((w > 7) AND (s <> 'it''s'::text))"},
            ],
        }
    }
    assert plan_values(sql, custom) == {1: "42", 2: "-1.5", 3: "9.25", 4: "7", 5: "it's"}
    generic = {"Plan": {"Index Cond": "(k = $1)"}}
    assert plan_values("SELECT * FROM a WHERE k = $1", generic) == {}
    both = {"Plan": {"Filter": "((k = 1) OR (k = 2))"}}  # which one is $1?
    assert plan_values("SELECT * FROM a WHERE k = $1 OR k = 2", both) == {}
    assert plan_values("SELECT * FROM a WHERE k = $1 * 2", {"Plan": {"Filter": "(k = 4)"}}) == {}


def test_capture_files_are_for_their_owner_only(tmp_path: Path) -> None:
    """A new directory is 0700 whatever the umask; a file is 0600 even when it existed with a
    wider mode; an existing directory keeps its mode and is named when others can read it."""
    old = os.umask(0o022)
    try:
        assert private_directory(tmp_path / "new") == []
        assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
        existing = tmp_path / "new" / "dump.sql"
        existing.write_text("old rows")
        existing.chmod(0o644)
        with open_private(existing) as stream:
            stream.write(b"rows")
        assert stat.S_IMODE(existing.stat().st_mode) == 0o600 and existing.read_text() == "rows"
        shared = tmp_path / "shared"
        shared.mkdir(mode=0o755)
        (note,) = private_directory(shared)
        assert "open to other users (mode 755)" in note
        assert stat.S_IMODE(shared.stat().st_mode) == 0o755
    finally:
        os.umask(old)
