"""Varied SQL for the diverse ingest benchmark (`bench_ingest_diverse.py`): a TPC-H-like schema,
a partitioned table and pgbench's tables, and a generator of statements over them.

`statement(rng)` draws one statement from ~20 families (point and range lookups, joins of 2-5
tables, CTEs, correlated subplans and initplans, EXISTS / IN / NOT EXISTS, aggregates with
GROUP BY / ROLLUP / HAVING, window functions, UNION / EXCEPT, LATERAL, partition pruning,
DISTINCT ON, CASE, IN lists of varying length, DML) with random columns, predicates, orders,
limits and literals, so a few thousand executions give thousands of distinct statements and
hundreds of distinct plan shapes. Each is (sql, params): params None means literals inline
(simple protocol); a tuple means `%s` placeholders bound by the server ($n).
"""

from __future__ import annotations

import random
from collections.abc import Callable

SCHEMA = (
    "CREATE TABLE region (r_regionkey int PRIMARY KEY, r_name text)",
    "CREATE TABLE nation (n_nationkey int PRIMARY KEY, n_name text, n_regionkey int)",
    "CREATE TABLE supplier (s_suppkey int PRIMARY KEY, s_name text, s_nationkey int,"
    " s_acctbal numeric)",
    "CREATE TABLE customer (c_custkey int PRIMARY KEY, c_name text, c_nationkey int,"
    " c_acctbal numeric, c_mktsegment text)",
    "CREATE TABLE part (p_partkey int PRIMARY KEY, p_name text, p_brand text, p_size int,"
    " p_retailprice numeric)",
    "CREATE TABLE orders (o_orderkey int PRIMARY KEY, o_custkey int, o_orderstatus char(1),"
    " o_totalprice numeric, o_orderdate date, o_priority text)",
    "CREATE TABLE lineitem (l_orderkey int, l_linenumber int, l_partkey int, l_suppkey int,"
    " l_quantity int, l_price numeric, l_discount numeric, l_shipdate date, l_returnflag char(1),"
    " PRIMARY KEY (l_orderkey, l_linenumber))",
    "INSERT INTO region SELECT i, 'region ' || i FROM generate_series(0, 4) i",
    "INSERT INTO nation SELECT i, 'nation ' || i, i % 5 FROM generate_series(0, 24) i",
    "INSERT INTO supplier SELECT i, 'supplier ' || i, i % 25, (i * 37 % 10000) / 3.0"
    " FROM generate_series(1, 1000) i",
    "INSERT INTO customer SELECT i, 'customer ' || i, i % 25, (i * 53 % 20000) / 7.0,"
    " (ARRAY['AUTO','BUILDING','FURNITURE','MACHINERY','HOUSEHOLD'])[i % 5 + 1]"
    " FROM generate_series(1, 15000) i",
    "INSERT INTO part SELECT i, 'part ' || i, 'Brand#' || (i % 25), i % 50, 900 + i % 1000"
    " FROM generate_series(1, 20000) i",
    "INSERT INTO orders SELECT i, 1 + (i * 7919) % 15000, (ARRAY['F','O','P'])[i % 3 + 1],"
    " (i * 31 % 50000) / 1.3, date '1995-01-01' + (i % 1500), 'prio ' || (i % 5)"
    " FROM generate_series(1, 150000) i",
    "INSERT INTO lineitem SELECT o, n, 1 + (o * n * 13) % 20000, 1 + (o + n) % 1000, 1 + o % 50,"
    " (o % 1000) + n, (o % 10) / 100.0, date '1995-01-01' + ((o + n) % 1500),"
    " (ARRAY['A','N','R'])[(o + n) % 3 + 1] FROM generate_series(1, 150000) o,"
    " generate_series(1, 2) n",
    "CREATE INDEX orders_cust ON orders (o_custkey)",
    "CREATE INDEX orders_date ON orders (o_orderdate)",
    "CREATE INDEX lineitem_part ON lineitem (l_partkey)",
    "CREATE INDEX customer_nation ON customer (c_nationkey)",
    "CREATE TABLE events (id bigint, ts date, kind int, amount int) PARTITION BY RANGE (ts)",
    *(
        f"CREATE TABLE events_{m:02d} PARTITION OF events FOR VALUES FROM "
        f"('2025-{m:02d}-01') TO ('{2025 + m // 12}-{m % 12 + 1:02d}-01')"
        for m in range(1, 13)
    ),
    "INSERT INTO events SELECT i, date '2025-01-01' + (i % 365), i % 40, i % 997"
    " FROM generate_series(1, 200000) i",
    "CREATE INDEX events_kind ON events (kind)",
    "CREATE TABLE scratch (id serial PRIMARY KEY, k int, note text)",
    "CREATE FUNCTION orders_of(c int) RETURNS bigint LANGUAGE plpgsql AS"
    " $$ BEGIN RETURN (SELECT count(*) FROM orders WHERE o_custkey = c); END $$",
    "VACUUM ANALYZE",
)

Statement = tuple[str, tuple[object, ...] | None]

COLUMNS = {
    "orders": ["o_orderkey", "o_custkey", "o_orderstatus", "o_totalprice", "o_orderdate"],
    "customer": ["c_custkey", "c_name", "c_nationkey", "c_acctbal", "c_mktsegment"],
    "part": ["p_partkey", "p_name", "p_brand", "p_size", "p_retailprice"],
    "lineitem": ["l_orderkey", "l_partkey", "l_quantity", "l_price", "l_discount", "l_shipdate"],
}
KEYS = {"orders": (150000, "o_orderkey"), "customer": (15000, "c_custkey"),
        "part": (20000, "p_partkey")}  # fmt: skip


def _cols(rng: random.Random, table: str) -> str:
    return ", ".join(rng.sample(COLUMNS[table], rng.randint(1, len(COLUMNS[table]))))


def _date(rng: random.Random) -> str:
    return f"'{1995 + rng.randrange(4)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}'"


def point(rng: random.Random) -> Statement:
    table = rng.choice(list(KEYS))
    top, key = KEYS[table]
    if rng.random() < 0.4:
        return f"SELECT {_cols(rng, table)} FROM {table} WHERE {key} = %s", (rng.randint(1, top),)
    return f"SELECT {_cols(rng, table)} FROM {table} WHERE {key} = {rng.randint(1, top)}", None


def in_list(rng: random.Random) -> Statement:
    values = ", ".join(str(rng.randint(1, 15000)) for _ in range(rng.randint(2, 12)))
    return f"SELECT c_name, c_acctbal FROM customer WHERE c_custkey IN ({values})", None


def order_range(rng: random.Random) -> Statement:
    where = [f"o_orderdate BETWEEN {_date(rng)} AND {_date(rng)}"]
    if rng.random() < 0.5:
        where.append(f"o_orderstatus = '{rng.choice('FOP')}'")
    if rng.random() < 0.3:
        where.append(f"o_totalprice > {rng.randint(100, 30000)}")
    order = rng.choice(["", " ORDER BY o_totalprice DESC", " ORDER BY o_orderdate, o_orderkey"])
    return (
        f"SELECT {_cols(rng, 'orders')} FROM orders WHERE {' AND '.join(where)}{order}"
        f" LIMIT {rng.randint(1, 200)}",
        None,
    )


def join_agg(rng: random.Random) -> Statement:
    group = rng.choice(["n_name", "r_name", "c_mktsegment", "n_name, c_mktsegment"])
    having = f" HAVING count(*) > {rng.randint(1, 50)}" if rng.random() < 0.4 else ""
    agg = rng.choice(["count(*)", "sum(o_totalprice)", "avg(o_totalprice), max(o_orderdate)"])
    return (
        f"SELECT {group}, {agg} FROM orders JOIN customer ON c_custkey = o_custkey"
        " JOIN nation ON n_nationkey = c_nationkey JOIN region ON r_regionkey = n_regionkey"
        f" WHERE o_orderdate >= {_date(rng)} AND c_nationkey < {rng.randint(1, 25)}"
        f" GROUP BY {group}{having} ORDER BY 2 DESC",
        None,
    )


def lineitem_join(rng: random.Random) -> Statement:
    return (
        "SELECT p_brand, sum(l_price * (1 - l_discount)) AS revenue FROM lineitem"
        " JOIN part ON p_partkey = l_partkey JOIN supplier ON s_suppkey = l_suppkey"
        f" WHERE l_orderkey BETWEEN %s AND %s AND p_size < {rng.randint(2, 50)}"
        " GROUP BY p_brand ORDER BY revenue DESC",
        (low := rng.randint(1, 140000), low + rng.randint(10, 5000)),
    )


def cte(rng: random.Random) -> Statement:
    materialized = rng.choice(["", "MATERIALIZED ", "NOT MATERIALIZED "])
    return (
        f"WITH big AS {materialized}(SELECT o_custkey, sum(o_totalprice) AS total FROM orders"
        f" WHERE o_custkey < {rng.randint(10, 3000)} GROUP BY o_custkey)"
        " SELECT c_name, total FROM big JOIN customer ON c_custkey = big.o_custkey"
        f" WHERE total > {rng.randint(0, 50000)} ORDER BY total DESC LIMIT {rng.randint(1, 50)}",
        None,
    )


def subplan(rng: random.Random) -> Statement:
    kind = rng.randrange(4)
    nation = rng.randrange(25)
    if kind == 0:
        return (
            "SELECT c_custkey, (SELECT count(*) FROM orders o WHERE o.o_custkey = c.c_custkey)"
            f" FROM customer c WHERE c_nationkey = {nation} LIMIT {rng.randint(1, 40)}",
            None,
        )
    if kind == 1:
        return (
            "SELECT o_orderkey, o_totalprice FROM orders WHERE o_totalprice > (SELECT"
            f" avg(o_totalprice) FROM orders WHERE o_custkey = {rng.randint(1, 15000)})"
            f" AND o_custkey = {rng.randint(1, 15000)}",
            None,
        )
    negation = rng.choice(["", "NOT "])
    if kind == 2:
        return (
            f"SELECT count(*) FROM customer c WHERE c_nationkey = {nation} AND {negation}EXISTS"
            f" (SELECT 1 FROM orders o WHERE o.o_custkey = c.c_custkey"
            f" AND o_orderstatus = '{rng.choice('FOP')}')",
            None,
        )
    return (
        f"SELECT p_name FROM part WHERE p_partkey {negation}IN (SELECT l_partkey FROM lineitem"
        f" WHERE l_orderkey < {rng.randint(2, 400)}) AND p_size = {rng.randint(1, 49)}",
        None,
    )


def window(rng: random.Random) -> Statement:
    function = rng.choice(["rank()", "row_number()", "dense_rank()", "sum(o_totalprice)"])
    frame = rng.choice(["", " ROWS BETWEEN 2 PRECEDING AND CURRENT ROW"])
    return (
        f"SELECT o_custkey, o_totalprice, {function} OVER (PARTITION BY o_custkey ORDER BY"
        f" o_totalprice DESC{frame}) FROM orders WHERE o_custkey BETWEEN {(c := rng.randint(1, 14000))}"
        f" AND {c + rng.randint(1, 300)}",
        None,
    )


def partitions(rng: random.Random) -> Statement:
    month = rng.randint(1, 12)
    end = min(12, month + rng.randint(0, 3))
    group = rng.choice(["kind", "ts", "kind, ts"])
    return (
        f"SELECT {group}, count(*), sum(amount) FROM events WHERE ts >= '2025-{month:02d}-01'"
        f" AND ts < '2025-{end:02d}-28' AND kind {rng.choice(['=', '<', '>'])} {rng.randrange(40)}"
        f" GROUP BY {group} ORDER BY 2 DESC LIMIT {rng.randint(1, 30)}",
        None,
    )


def parallel(rng: random.Random) -> Statement:
    return (
        f"SELECT l_returnflag, count(*), sum(l_quantity), avg(l_discount) FROM lineitem"
        f" WHERE l_shipdate < {_date(rng)} AND l_quantity > {rng.randint(1, 49)}"
        " GROUP BY l_returnflag",
        None,
    )


def pgbench_tables(rng: random.Random) -> Statement:
    return (
        "SELECT b.bid, count(*), sum(a.abalance) FROM pgbench_accounts a JOIN pgbench_branches b"
        f" ON a.bid = b.bid WHERE a.aid BETWEEN {(a := rng.randint(1, 900000))}"
        f" AND {a + rng.randint(1, 2000)} GROUP BY b.bid",
        None,
    )


def set_ops(rng: random.Random) -> Statement:
    operator = rng.choice(["UNION", "UNION ALL", "EXCEPT", "INTERSECT"])
    return (
        f"SELECT o_custkey FROM orders WHERE o_orderkey < {rng.randint(10, 2000)} {operator}"
        f" SELECT c_custkey FROM customer WHERE c_nationkey = {rng.randrange(25)}",
        None,
    )


def lateral(rng: random.Random) -> Statement:
    return (
        "SELECT c_name, last.o_orderdate FROM customer, LATERAL (SELECT o_orderdate FROM orders"
        f" WHERE o_custkey = c_custkey ORDER BY o_orderdate DESC LIMIT {rng.randint(1, 3)}) last"
        f" WHERE c_nationkey = {rng.randrange(25)} AND c_acctbal > {rng.randint(0, 2800)}",
        None,
    )


def rollup(rng: random.Random) -> Statement:
    return (
        "SELECT o_orderstatus, o_priority, count(*) FROM orders WHERE o_custkey < %s"
        f" GROUP BY {rng.choice(['ROLLUP', 'CUBE'])} (o_orderstatus, o_priority)",
        (rng.randint(10, 15000),),
    )


def distinct_case(rng: random.Random) -> Statement:
    return (
        "SELECT DISTINCT ON (o_custkey) o_custkey, CASE WHEN o_totalprice > "
        f"{rng.randint(100, 30000)} THEN 'big' ELSE 'small' END FROM orders WHERE o_custkey"
        f" < {rng.randint(2, 500)} ORDER BY o_custkey, o_orderdate DESC",
        None,
    )


def text_search(rng: random.Random) -> Statement:
    return (
        f"SELECT p_partkey, p_retailprice FROM part WHERE p_name LIKE 'part {rng.randint(1, 999)}%'"
        f" AND p_brand = 'Brand#{rng.randrange(25)}'",
        None,
    )


def dml(rng: random.Random) -> Statement:
    kind = rng.randrange(3)
    if kind == 0:
        return (
            f"INSERT INTO scratch (k, note) VALUES ({rng.randint(1, 999)}, 'n{rng.random()}')",
            None,
        )
    if kind == 1:
        return f"UPDATE scratch SET note = 'u' WHERE k = {rng.randint(1, 999)}", None
    return f"DELETE FROM scratch WHERE k = {rng.randint(1, 999)} AND id % 7 = 0", None


def function_call(rng: random.Random) -> Statement:
    return f"SELECT orders_of({rng.randint(1, 15000)})", None  # nested statement logged too


FAMILIES: list[tuple[Callable[[random.Random], Statement], int]] = [
    (point, 12), (in_list, 5), (order_range, 10), (join_agg, 6), (lineitem_join, 5), (cte, 6),
    (subplan, 8), (window, 5), (partitions, 8), (parallel, 2), (pgbench_tables, 4),
    (set_ops, 4), (lateral, 4), (rollup, 3), (distinct_case, 4), (text_search, 4), (dml, 6),
    (function_call, 3),
]  # fmt: skip


def statement(rng: random.Random) -> Statement:
    family = rng.choices([f for f, _ in FAMILIES], [w for _, w in FAMILIES])[0]
    return family(rng)
