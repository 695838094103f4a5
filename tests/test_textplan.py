"""Text-format auto_explain plans read back equal to the JSON-format plans of the same statements.

Each statement runs twice in one session on a real cluster, with `auto_explain.log_format`
text then json (inside a rolled-back transaction with its planner settings); the server log is
read back and every text entry must have the JSON entry's fingerprint and facts.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import FreshDb

from collectors.logs.formats import Position
from collectors.logs.plans import LoggedPlan, read_entry
from collectors.logs.prefix import TimeParser
from collectors.logs.registry import make_reader
from collectors.logs.textplan import node_from_label
from collectors.servers.embedded import EmbeddedCluster
from detector.model import fingerprint, signature

REPRO = Path(__file__).resolve().parent / "fixtures" / "logs" / "repro"
# no table with autovacuum: the statements' rolled-back writes leave dead rows, and an
# autovacuum or auto-ANALYZE in one of the two databases only (seen under load on t and on m)
# gave the text and JSON plans different costs and estimates
SETUP = """
CREATE EXTENSION btree_gist;
CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL, g int NOT NULL, s text NOT NULL)
  WITH (autovacuum_enabled = off);
INSERT INTO t SELECT i, i % 100, i % 7, md5(i::text) FROM generate_series(1, 20000) i;
CREATE INDEX t_v ON t (v);
CREATE INDEX t_g_v ON t (g, v);
CREATE TABLE u (id int PRIMARY KEY, t_id int NOT NULL, w int NOT NULL)
  WITH (autovacuum_enabled = off);
INSERT INTO u SELECT i, (i * 7) % 20000 + 1, i % 10 FROM generate_series(1, 5000) i;
CREATE TABLE shapes (id int PRIMARY KEY, b box NOT NULL, p point NOT NULL, n int NOT NULL)
  WITH (autovacuum_enabled = off);
INSERT INTO shapes SELECT i, box(point(i % 100, i / 100), point(i % 100 + 1, i / 100 + 1)),
  point(i % 100, i / 100), i % 50 FROM generate_series(1, 5000) i;
CREATE INDEX shapes_b ON shapes USING gist (b);
CREATE INDEX shapes_p ON shapes USING gist (p);
CREATE INDEX shapes_n ON shapes USING gist (n);
CREATE TABLE m (k int NOT NULL, ts int NOT NULL, val int NOT NULL) PARTITION BY RANGE (k);
CREATE TABLE m1 PARTITION OF m FOR VALUES FROM (0) TO (1000) WITH (autovacuum_enabled = off);
CREATE TABLE m2 PARTITION OF m FOR VALUES FROM (1000) TO (2000) WITH (autovacuum_enabled = off);
CREATE TABLE m3 PARTITION OF m DEFAULT WITH (autovacuum_enabled = off);
INSERT INTO m SELECT i % 3000, i, i % 13 FROM generate_series(1, 30000) i;
CREATE INDEX m_k_ts ON m (k, ts);
CREATE EXTENSION file_fdw;
CREATE SERVER files FOREIGN DATA WRAPPER file_fdw;
CREATE FOREIGN TABLE ft (a int) SERVER files OPTIONS (program 'seq 1 50');
CREATE TABLE big (id int NOT NULL, x int NOT NULL) WITH (autovacuum_enabled = off);
INSERT INTO big SELECT i, i % 1000 FROM generate_series(1, 30000) i;
VACUUM ANALYZE
"""
NL = "enable_hashjoin=off enable_mergejoin=off"
HJ = "enable_nestloop=off enable_mergejoin=off"
MJ = "enable_nestloop=off enable_hashjoin=off"
PAR = (
    "parallel_setup_cost=0 parallel_tuple_cost=0 min_parallel_table_scan_size=0"
    " min_parallel_index_scan_size=0 max_parallel_workers_per_gather=2"
)
MACROS = {"NL": NL, "HJ": HJ, "MJ": MJ, "PAR": PAR}
# one statement per `;` at a line end; a leading /* comment */ holds its planner settings
STATEMENTS = """
/* NL */ SELECT count(*) FROM t JOIN u ON u.t_id = t.id WHERE u.w = 3;
/* HJ */ SELECT count(*) FROM t JOIN u ON u.t_id = t.id WHERE u.w = 3;
/* MJ */ SELECT count(*) FROM t JOIN u ON u.t_id = t.id WHERE u.w = 3;
SELECT count(*) FROM t LEFT JOIN u ON u.t_id = t.id WHERE t.v = 3;
/* MJ */ SELECT count(*) FROM t FULL JOIN u ON u.t_id = t.id;
/* HJ */ SELECT count(*) FROM t FULL JOIN u ON u.t_id = t.id;
SELECT count(*) FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.t_id = t.id);
SELECT count(*) FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.t_id = t.id);
SELECT count(*) FROM u WHERE NOT EXISTS (SELECT FROM t WHERE t.id = u.t_id);
SELECT count(*) FROM u WHERE EXISTS (SELECT FROM t WHERE t.id = u.t_id AND t.v < 5);
/* NL */ SELECT count(*) FROM u WHERE NOT EXISTS (SELECT FROM t WHERE t.id = u.t_id);
/* work_mem=64kB HJ */ SELECT count(*) FROM t a JOIN t b ON a.s = b.s;
/* NL */ SELECT count(*) FROM u JOIN t ON t.id = u.w + 1;
/* NL enable_memoize=off */ SELECT count(*) FROM u a JOIN u b ON a.w < b.w WHERE a.id < 50;
SELECT id, (SELECT max(w) FROM u WHERE u.t_id = t.id) FROM t WHERE t.v = 5;
SELECT count(*) FROM t WHERE id NOT IN (SELECT t_id FROM u);
SELECT t.id, array(SELECT w FROM u WHERE u.t_id = t.id) FROM t LEFT JOIN u ON u.t_id = t.id
  WHERE t.id < 30;
/* HJ */ SELECT t.id, (SELECT count(*) FROM u x WHERE x.w = t.g) FROM t JOIN u ON u.t_id = t.id
  WHERE u.w = 2;
SELECT id FROM t WHERE v = (SELECT max(v) FROM t WHERE id < 100) ORDER BY id DESC LIMIT 5;
SELECT id FROM t WHERE v > (SELECT avg(w) FROM u) AND EXISTS (SELECT 1 FROM u WHERE u.t_id =
  t.id AND u.w = t.g) LIMIT 10;
SELECT count(*) FROM t WHERE EXISTS (SELECT 1 FROM u WHERE w = 100);
SELECT id FROM t WHERE v = 1 AND g = (SELECT max(w) FROM u WHERE u.t_id = t.id AND u.w > (SELECT
  min(w) FROM u WHERE id < 10)) LIMIT 5;
WITH x AS MATERIALIZED (SELECT id, v FROM t WHERE id < 300) SELECT count(*) FROM x a JOIN x b ON
  a.id = b.v;
WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 100) SELECT sum(n) FROM
  r;
WITH d AS (DELETE FROM u WHERE w = 1 RETURNING *) SELECT count(*) FROM d;
SELECT count(*) FROM m;
SELECT * FROM m WHERE k = 1500 AND ts < 5000;
SELECT count(*) FROM m WHERE k = (SELECT 1500);
SELECT * FROM m ORDER BY k, ts LIMIT 10;
/* enable_partitionwise_join=on enable_partitionwise_aggregate=on */ SELECT a.k, count(*) FROM m
  a JOIN m b ON a.k = b.k AND a.ts = b.ts WHERE a.val = 3 GROUP BY a.k;
/* PAR */ SELECT count(*) FROM big WHERE x < 10;
/* PAR */ SELECT x, count(*) FROM big GROUP BY x;
/* PAR enable_hashagg=off */ SELECT x, count(*) FROM big GROUP BY x;
/* PAR */ SELECT count(*) FROM big JOIN t ON t.id = big.id;
/* PAR enable_seqscan=off enable_bitmapscan=off */ SELECT sum(v) FROM t WHERE id < 10000;
/* PAR enable_seqscan=off enable_bitmapscan=off */ SELECT count(*) FROM t WHERE id < 9000;
/* PAR enable_seqscan=off enable_indexscan=off */ SELECT count(*) FROM t WHERE v < 20;
/* PAR */ SELECT count(*) FROM m WHERE val = 3;
/* PAR */ SELECT * FROM big WHERE x = 5 ORDER BY id LIMIT 20;
SELECT count(*) FROM shapes WHERE b && box '((10,10),(20,20))';
/* enable_bitmapscan=off */ SELECT count(*) FROM shapes WHERE b && box '((10,10),(20,20))';
SELECT id FROM shapes ORDER BY p <-> point '(50,20)' LIMIT 5;
/* enable_bitmapscan=off enable_seqscan=off */ SELECT count(*) FROM shapes WHERE n = 7;
/* enable_bitmapscan=off */ SELECT p FROM shapes WHERE p <@ box '((0,0),(5,5))';
SELECT * FROM t ORDER BY s LIMIT 10;
/* work_mem=64kB */ SELECT s FROM t ORDER BY s;
SELECT * FROM t ORDER BY g, v, s LIMIT 10;
SELECT id FROM t ORDER BY id DESC LIMIT 3;
/* enable_hashagg=off */ SELECT v, count(*) FROM t GROUP BY v;
SELECT v, count(*) FROM t GROUP BY v;
SELECT g, v, count(*) FROM t GROUP BY GROUPING SETS ((g), (v), ());
SELECT g, v, count(*) FROM t GROUP BY ROLLUP (g, v);
/* work_mem=64kB */ SELECT s, count(*) FROM t GROUP BY s;
SELECT count(DISTINCT v) FROM t;
/* enable_hashagg=off */ SELECT g FROM t GROUP BY g;
SELECT DISTINCT g FROM t;
SELECT id, sum(v) OVER (PARTITION BY g ORDER BY id) FROM t WHERE id < 100;
SELECT id, row_number() OVER w, rank() OVER w2 FROM t WHERE id < 50 WINDOW w AS (ORDER BY v), w2
  AS (ORDER BY id);
SELECT * FROM (SELECT id, row_number() OVER (ORDER BY id) rn FROM t WHERE id < 30) x WHERE rn %
  2 = 0;
SELECT v FROM t UNION SELECT w FROM u;
SELECT v FROM t INTERSECT SELECT w FROM u;
SELECT v FROM t EXCEPT ALL SELECT w FROM u;
/* enable_hashagg=off */ SELECT v FROM t EXCEPT SELECT w FROM u;
SELECT id FROM t WHERE id < 3 UNION ALL SELECT id FROM u WHERE id < 3;
SELECT t.id, x.w FROM t, LATERAL (SELECT w FROM u WHERE u.t_id = t.id ORDER BY w LIMIT 1) x
  WHERE t.id < 20;
SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS vv(a, b) JOIN t ON t.id = vv.a;
SELECT sum(g) FROM generate_series(1, 1000) g;
SELECT * FROM ROWS FROM (generate_series(1, 3), generate_series(1, 4)) AS z(a, b);
SELECT * FROM unnest(ARRAY[1, 2, 3]) WITH ORDINALITY;
SELECT generate_series(1, 3), id FROM t WHERE id < 3;
SELECT * FROM (SELECT v, count(*) c FROM t GROUP BY v ORDER BY 2 DESC LIMIT 5) s WHERE s.c > 1;
SELECT * FROM (SELECT DISTINCT ON (g) g, id FROM t ORDER BY g, id) "Sub q";
INSERT INTO u SELECT id + 100000, id, 1 FROM t WHERE id < 10 RETURNING id;
UPDATE t SET v = v + 1 WHERE id < 5 RETURNING id, v;
DELETE FROM u WHERE w = 9 RETURNING id;
UPDATE m SET val = 0 WHERE k < 10 OR k > 2500;
INSERT INTO t VALUES (1, 1, 1, 'x') ON CONFLICT (id) DO NOTHING;
SELECT * FROM t WHERE ctid = '(0,1)';
SELECT count(*) FROM t WHERE ctid < '(5,0)';
SELECT count(*) FROM t TABLESAMPLE SYSTEM (50) REPEATABLE (1);
SELECT * FROM t WHERE id = 5 FOR UPDATE;
SELECT count(*) FROM t WHERE v = 3 OR id < 20;
/* enable_seqscan=off */ SELECT count(*) FROM t WHERE v = 3 AND g = 3;
/* enable_seqscan=off */ SELECT count(*) FROM u WHERE w = 1;
SELECT 1;
SELECT now() WHERE false;
SELECT count(*) FROM t WHERE v IN (1, 2, 3);
SELECT count(*) FROM t WHERE v = ANY (SELECT w FROM u WHERE id < 10);
/* plan_cache_mode=force_generic_plan */ SELECT count(*) FROM m WHERE k = %s;
/* enable_seqscan=off enable_indexscan=off */ SELECT count(*) FROM t WHERE v < 3 AND id < 2000;
SELECT count(*) FROM u WHERE w = 1 AND t_id IN (SELECT v FROM t);
SELECT count(*) FROM t a WHERE a.id < 50 AND EXISTS (SELECT FROM t b WHERE b.v = a.v);
SELECT count(*) FROM ft JOIN t ON t.id = ft.a;
"""
SINCE = {
    15: ("MERGE INTO u USING t ON u.t_id = t.id AND t.id < 5 WHEN MATCHED THEN UPDATE SET w = 0",),
    17: ("SELECT * FROM JSON_TABLE('[1, 2]'::jsonb, '$[*]' COLUMNS (a int PATH '$')) jt",),
}
PARAMS = {"SELECT count(*) FROM m WHERE k = %s": (1500,)}


def _names(text: str) -> tuple[str, ...]:
    """`a|b c|d` -> ("a", "b c", "d"); without a `|`, the words."""
    return tuple(text.split("|") if "|" in text else text.split())


EXERCISED = set(  # node types, parent relationships and join types the statements produce
    _names(
        "Hash|Memoize|Incremental Sort|Merge Append|Gather|Gather Merge|WindowAgg|Subquery Scan"
        "|Function Scan|Values Scan|CTE Scan|WorkTable Scan|SetOp|ModifyTable|BitmapOr|BitmapAnd"
        "|Foreign Scan|Tid Scan|Sample Scan|Materialize|Merge Join|Nested Loop|Hash Join"
        "|Index Only Scan|ProjectSet|InitPlan|SubPlan|Member|Subquery|Full|Anti|Semi|Right"
    )
)
FACTS = _names(  # PlanNode fields that must agree
    "node_type relation schema index_name join_type strategy partial_mode parent_relationship"
    " scan_direction cte_name subplan_name startup_cost total_cost plan_rows disabled"
    " workers_planned hash_batches original_hash_batches rows_removed_by_recheck"
)
SERIAL_FACTS = _names(  # ... unless below a Gather, where they vary from one execution to the next
    "actual_rows actual_loops sort_method sort_space_type exact_heap_blocks lossy_heap_blocks"
    " rows_removed_by_filter"
)
RAW_FACTS = _names(  # JSON keys that must agree
    "Hash Buckets|Original Hash Buckets|Operation|Alias|Index Searches|Subplans Removed|Schema"
    "|CTE Name|Table Function Name|Index Cond|Recheck Cond|Filter|Join Filter|Hash Cond"
    "|Merge Cond|One-Time Filter|TID Cond|Order By|Run Condition|Cache Key"
)
SERIAL_RAW_FACTS = ("Sort Space Used",)


@dataclass(frozen=True)
class Pair:
    text: LoggedPlan
    json: LoggedPlan


def statements(major: int) -> Iterator[tuple[str, str]]:
    """(planner settings, SQL) of each statement the server of `major` can run."""
    for text in STATEMENTS.strip().split(";\n"):
        statement = " ".join(line.strip() for line in text.strip(" ;\n").split("\n"))
        settings = ""
        if statement.startswith("/*"):
            comment, _, statement = statement[2:].partition("*/")
            settings = " ".join(MACROS.get(word, word) for word in comment.split())
        yield settings, statement.strip()
    for since, texts in SINCE.items():
        if major >= since:
            yield from (("", text) for text in texts)


def read_plans(log: Path, start: int = 0, pid: int | None = None) -> list[LoggedPlan]:
    with log.open("rb") as stream:
        reader = make_reader("stderr", stream, Position(offset=start), TimeParser(), None, 10**6)
        entries = [e for b in reader.batches() for e in b.entries if pid in (None, e.pid)]
    return [read_entry(entry) for entry in entries]


def run_logged(dsn: str, major: int, plan_format: str, *, verbose: bool) -> int:
    """Set up a database and log every statement in `plan_format`; the backend's pid."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in SETUP.split(";\n"):
            conn.execute(statement)
        session = {
            "jit": "off",
            "auto_explain.log_analyze": "on",
            "auto_explain.log_buffers": "on",
            "auto_explain.log_verbose": "on" if verbose else "off",
            "auto_explain.log_format": plan_format,
            "auto_explain.log_min_duration": "0",
        }
        for name, value in session.items():
            conn.execute(f"SET {name} = '{value}'")
        for settings, statement in statements(major):
            with conn.transaction(force_rollback=True):
                for setting in settings.split():
                    name, value = setting.split("=")
                    conn.execute(f"SET LOCAL {name} = '{value}'")
                conn.execute(statement, PARAMS.get(statement))
        return conn.info.backend_pid


def capture(cluster: EmbeddedCluster, fresh_db: FreshDb, *, verbose: bool) -> list[Pair]:
    """Every statement logged in text in one database and in JSON in a twin, paired."""
    major = cluster.installation.major
    start = cluster.log_path.stat().st_size
    text_pid = run_logged(fresh_db(cluster), major, "text", verbose=verbose)
    json_pid = run_logged(fresh_db(cluster), major, "json", verbose=verbose)
    texts = read_plans(cluster.log_path, start, text_pid)
    jsons = read_plans(cluster.log_path, start, json_pid)
    assert len(texts) == len(jsons) == len(list(statements(major)))
    assert {p.plan_format for p in texts} == {"text"}
    assert {p.plan_format for p in jsons} == {"json"}
    assert [p.query_text for p in texts] == [p.query_text for p in jsons]
    return [Pair(text, json) for text, json in zip(texts, jsons, strict=True)]


def _raw_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _raw_nodes(child)


def _same(a: object, b: object) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.005)
    return a == b


def differences(pair: Pair) -> list[str]:
    """What the text plan says differently from the JSON plan (empty when they agree).

    Below a Gather, which processes ran a node varies from one execution to the next: there
    only the rows over all loops are compared, not loops, per-loop rows or the leader's sort.
    """
    text, json = pair.text.plan(), pair.json.plan()
    found = []
    if fingerprint(text) != fingerprint(json):
        found.append("fingerprint")
    if text.generic != json.generic:
        found.append(f"generic: {text.generic} != {json.generic}")
    text_nodes, json_nodes = list(text.nodes()), list(json.nodes())
    if len(text_nodes) != len(json_nodes):
        return [*found, f"{len(text_nodes)} nodes in text, {len(json_nodes)} in JSON"]
    gathers = [path for path, node in json_nodes if node.node_type.startswith("Gather")]
    raw = zip(
        _raw_nodes(pair.text.document["Plan"]), _raw_nodes(pair.json.document["Plan"]), strict=True
    )
    for (path, a), (_, b), (a_raw, b_raw) in zip(text_nodes, json_nodes, raw, strict=False):
        serial = not any(path.startswith(gather) for gather in gathers)
        facts = [(f, getattr(a, f), getattr(b, f)) for f in FACTS]
        facts += [(k, a_raw.get(k), b_raw.get(k)) for k in RAW_FACTS]
        if serial:
            facts += [(f, getattr(a, f), getattr(b, f)) for f in SERIAL_FACTS]
            facts += [(k, a_raw.get(k), b_raw.get(k)) for k in SERIAL_RAW_FACTS]
        elif b.relation and not _same_total(
            a.actual_rows_total, b.actual_rows_total, b.actual_loops
        ):
            facts.append(("rows over loops", a.actual_rows_total, b.actual_rows_total))
        if "Function Name" in b_raw:  # text names a lone ROWS FROM alias as a function
            facts.append(("Function Name", a_raw.get("Function Name"), b_raw["Function Name"]))
        found += [f"{path} {f}: {x!r} != {y!r}" for f, x, y in facts if not _same(x, y)]
    return found


def _same_total(a: float | None, b: float | None, loops: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= max(1.0, 2 * (loops or 1))


def report(pairs: list[Pair]) -> list[str]:
    lines = []
    for pair in pairs:
        if found := differences(pair):
            lines.append(pair.json.query_text[:90] + "\n    " + "\n    ".join(found))
    return lines


@pytest.mark.parametrize("verbose", [False, True], ids=["terse", "verbose"])
def test_text_plans_read_as_json(pg_any: EmbeddedCluster, fresh_db: FreshDb, verbose: bool) -> None:
    pairs = capture(pg_any, fresh_db, verbose=verbose)
    disagree = report(pairs)
    shapes = {
        fact
        for pair in pairs
        for _, node in pair.json.plan().nodes()
        for fact in (node.node_type, node.parent_relationship, node.join_type)
    }
    generic = [p.json.query_text for p in pairs if p.json.plan().generic]
    assert generic == [k.replace("%s", "$1") for k in PARAMS], (
        "only that one is planned without values"
    )
    assert shapes >= EXERCISED, f"the statements no longer produce {EXERCISED - shapes}"
    assert not disagree, f"{len(disagree)} of {len(pairs)} entries differ:\n" + "\n".join(disagree)


def test_hash_node_is_not_a_hash_join() -> None:
    """A `->  Hash` below a Hash Join is the Hash node, with its buckets and batches."""
    (logged,) = read_plans(REPRO / "text_hash_node.stderr.log")
    plan = logged.plan()
    assert signature(plan) == (
        "Sort > HashJoin {SeqScan(pg_constraint); "
        "Hash > IndexScan(pg_class pg_class_relname_nsp_index)}"
    )
    hash_node = plan.root.children[0].children[1]
    assert (hash_node.node_type, hash_node.join_type, hash_node.hash_batches) == ("Hash", None, 1)
    raw = logged.document["Plan"]["Plans"][0]["Plans"][1]
    assert (raw["Hash Buckets"], raw["Original Hash Buckets"], raw["Peak Memory Usage"]) == (
        1024,
        1024,
        9,
    )
    assert plan.root.sort_method == "quicksort"


def test_subplan_after_a_subtree_belongs_to_the_node_above() -> None:
    """`SubPlan 1` after the outer join's second child is the outer join's, not that child's."""
    (logged,) = read_plans(REPRO / "text_subplan_attach.stderr.log")
    root = logged.plan().root
    assert [c.node_type for c in root.children] == ["Nested Loop", "Seq Scan", "Function Scan"]
    subplan = root.children[2]
    assert (subplan.parent_relationship, subplan.subplan_name) == ("SubPlan", "SubPlan 1")
    assert root.children[1].children == ()


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("Hash", {"Node Type": "Hash"}),
        ("Hash Right Semi Join", {"Node Type": "Hash Join", "Join Type": "Right Semi"}),
        ("Nested Loop Anti Join", {"Node Type": "Nested Loop", "Join Type": "Anti"}),
        ("Result Cache", {"Node Type": "Result Cache"}),
        ("Foreign Update on s.ft f", {"Node Type": "Foreign Scan", "Operation": "Update"}),
        ("Custom Scan (Citus) on t", {"Node Type": "Custom Scan", "Relation Name": "t"}),
        (
            'Index Scan Backward using "T pkey" on "My S"."T t" "a b"',
            {"Index Name": "T pkey", "Schema": "My S", "Relation Name": "T t", "Alias": "a b"},
        ),
        ('Subquery Scan on "*SELECT* 1"', {"Node Type": "Subquery Scan", "Alias": "*SELECT* 1"}),
        ("Function Scan on pg_catalog.generate_series g", {"Function Name": "generate_series"}),
        ("Finalize HashAggregate", {"Strategy": "Hashed", "Partial Mode": "Finalize"}),
        ("HashSetOp Except All", {"Node Type": "SetOp", "Strategy": "Hashed"}),
    ],
)
def test_labels_of_other_versions_and_names(label: str, expected: dict[str, str]) -> None:
    node = node_from_label(label)
    assert {key: node.get(key) for key in expected} == expected
