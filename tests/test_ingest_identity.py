"""Query identity and entry content on logs written by real servers (tests/fixtures/logs):
the same statements give the same queries in stderr, csvlog and jsonlog, a queryid is only a
label of the text it belongs to, the guessed prefix keeps %Q, EXPLAIN-only entries are plans
without a duration, empty query texts and undecodable bytes are problems."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import ingest, stored

from detector.store import Store

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
REPRO = LOGS / "repro"  # cut from real server logs (issue 13)
QUIRKS = LOGS / "quirks"  # capture_logs.quirks_workload on PostgreSQL 17
PREFIX_GUESS = None


def queries(store_path: Path) -> list[tuple[Any, ...]]:
    """(query key, normalized SQL, plans, queryid labels) per query."""
    with Store(store_path, read_only=True) as store:
        return list(
            store._con.execute(
                "SELECT o.query_key, q.sql, count(*), list(DISTINCT e.queryid) "
                "FILTER (WHERE e.queryid IS NOT NULL) FROM observations o "
                "JOIN queries q USING (query_key) JOIN log_entries e USING (observation_id) "
                "GROUP BY ALL ORDER BY ALL"
            ).fetchall()
        )


def problems(store_path: Path) -> list[tuple[str, int, str, str]]:
    with Store(store_path, read_only=True) as store:
        return store.log_problems()


@pytest.mark.parametrize("name", ["nested_qid.stderr.log", "nested_qid.csv", "nested_qid.json"])
def test_nested_statements_are_their_own_queries_in_every_format(tmp_path: Path, name: str) -> None:
    """log_nested_statements with compute_query_id: csvlog/jsonlog records of the nested
    statements carry the caller's query_id; the three texts are still three queries."""
    ingest(tmp_path / "s.duckdb", REPRO / "nested_qid.stderr.log", prefix=PREFIX_GUESS)
    ingest(tmp_path / name, REPRO / name, prefix=PREFIX_GUESS)
    expected = [row[:3] for row in queries(tmp_path / "s.duckdb")]
    found = queries(tmp_path / name)
    assert [row[:3] for row in found] == expected
    assert len(found) == 3 and {row[2] for row in found} == {5}
    labels = [queryid for row in found for queryid in row[3] or ()]
    assert len(labels) == len(set(labels))  # no queryid labels two texts


def test_the_guessed_prefix_keeps_the_query_id(tmp_path: Path) -> None:
    """'%m [%p] %q%u@%d qid=%Q ' (the README's prefix) without log_verbose: the query id is
    only in the prefix, and guessing reads it as the explicit prefix does."""
    ingest(tmp_path / "known.duckdb", QUIRKS / "pg.log")
    ingest(tmp_path / "guessed.duckdb", QUIRKS / "pg.log", prefix=PREFIX_GUESS)
    known, guessed = stored(tmp_path / "known.duckdb"), stored(tmp_path / "guessed.duckdb")
    assert known == guessed
    assert all(row[6] is not None for row in guessed)
    assert {row[:2] for row in guessed} == {("postgres", row[1]) for row in guessed}


@pytest.mark.parametrize("name", ["pg.log", "pg.csv", "pg.json"])
def test_explain_only_is_a_plan_and_an_empty_query_text_a_problem(
    tmp_path: Path, name: str
) -> None:
    store_path = tmp_path / "q.duckdb"
    (report,) = ingest(store_path, QUIRKS / name)
    with Store(store_path, read_only=True) as store:
        rows = dict(
            store._con.execute(
                "SELECT q.sql, o.duration_ms FROM observations o JOIN queries q "
                "USING (query_key) WHERE q.sql LIKE 'EXPLAIN%'"
            ).fetchall()
        )
        texts = [row[0] for row in store._con.execute("SELECT sql FROM queries").fetchall()]
    assert rows["EXPLAIN SELECT count(*) FROM t WHERE v = $1"] is None  # never executed
    assert rows["EXPLAIN ANALYZE SELECT count(*) FROM t WHERE v = $1"] > 0
    assert all(text.strip() for text in texts)
    assert report.plans == 7 and report.problem_count == 1
    ((_, line, kind, _),) = problems(store_path)
    assert kind == "no-query"
    entry = b"\n".join((QUIRKS / name).read_bytes().splitlines()[line - 1 : line + 2])
    assert b"duration: " in entry and re.search(rb'Query Text[\\"]+: [\\"]+,', entry)


def test_a_character_before_a_parameter_is_normalized_by_characters(tmp_path: Path) -> None:
    (report,) = ingest(tmp_path / "u.duckdb", REPRO / "utf8_before_param.stderr.log", prefix=None)
    assert report.plans == 1 and report.problem_count == 0
    ((_, sql, _, _),) = queries(tmp_path / "u.duckdb")
    assert sql == "SELECT c FROM sbtest1 WHERE c <> $2 AND id = $1 LIMIT $3"
    ((literals,),) = (
        Store(tmp_path / "u.duckdb", read_only=True)
        ._con.execute("SELECT params FROM observations")
        .fetchall()
    )
    assert json.loads(literals) == ["'Zürich'", "10"]


def test_a_byte_that_is_not_utf8_is_replaced_and_counted(tmp_path: Path) -> None:
    log = REPRO / "latin1_byte.stderr.log"
    (report,) = ingest(tmp_path / "l.duckdb", log, prefix=None)
    assert report.plans == 1 and report.problem_count == 1
    ((path, line, kind, message),) = problems(tmp_path / "l.duckdb")
    assert (path, kind) == (str(log), "encoding") and "e9" in message
    assert b"\xe9" in log.read_bytes().splitlines()[line - 1]
    ((_, sql, _, _),) = queries(tmp_path / "l.duckdb")
    assert sql == "SELECT c FROM sbtest1 WHERE c <> $1 AND id = $2 LIMIT $3"


@pytest.mark.parametrize("name", ["nested_qid.csv", "nested_qid.json"])
def test_a_byte_that_is_not_utf8_in_csvlog_and_jsonlog(tmp_path: Path, name: str) -> None:
    data = (REPRO / name).read_bytes().replace(b"FROM b WHERE", b"FROM b WHERE \xe9 ", 1)
    log = tmp_path / name
    log.write_bytes(data)
    (report,) = ingest(tmp_path / "e.duckdb", log)
    assert report.plans == 15
    ((_, line, kind, _),) = problems(tmp_path / "e.duckdb")
    assert kind == "encoding" and b"\xe9" in data.splitlines()[line - 1]
