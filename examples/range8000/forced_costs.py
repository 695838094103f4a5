"""Both plans' estimated costs on every version: why PostgreSQL 15, 17 and 18 switch at the same N.

Loads the table of workload.toml on an embedded cluster of each installed version (15, 17, 18),
then, for sum_range at every N of the sweep, asks the planner for the cost of the serial Index Scan
plan and of the serial Bitmap Heap Scan plan (the other scans disabled, no parallel workers), and
for the plan it chooses on its own, with work_mem 64kB and 4MB. Plan-only (EXPLAIN without
ANALYZE): under a minute.

    .venv/bin/python examples/range8000/forced_costs.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from collectors.servers.embedded import EmbeddedCluster  # noqa: E402
from collectors.servers.installations import find_installation  # noqa: E402
from detector.errors import PlanshiftError  # noqa: E402
from detector.jobs.workload import load_workload  # noqa: E402

SHORT = {"Index Scan": "Index", "Bitmap Heap Scan": "Bitmap", "Seq Scan": "parallel Seq"}
START = 200_001  # one fixed range start; the planner's choice does not depend on it here
FORCE = {
    "index": ("enable_bitmapscan", "enable_seqscan"),
    "bitmap": ("enable_indexscan", "enable_seqscan"),
}


def plan_cost(
    conn: psycopg.Connection[Any], n: int, work_mem: str, force: str | None
) -> tuple[str, float]:
    """(scan node type, total cost) of the plan, optionally forced to one scan type."""
    sql = (
        "EXPLAIN (FORMAT JSON) SELECT SUM(k) FROM sbtest1 "
        f"WHERE id BETWEEN {START} AND {START + n - 1}"
    )
    with conn.transaction(force_rollback=True):
        conn.execute("SELECT set_config('work_mem', %s, true)", [work_mem])
        if force:
            conn.execute("SELECT set_config('max_parallel_workers_per_gather', '0', true)")
            for guc in FORCE[force]:
                conn.execute("SELECT set_config(%s, 'off', true)", [guc])
        row = conn.execute(sql).fetchone()
    assert row is not None
    plan = row[0][0]["Plan"]
    scan = plan["Plans"][0]
    while scan.get("Plans") and scan["Node Type"] in ("Gather", "Aggregate"):  # parallel plans
        scan = scan["Plans"][0]
    return scan["Node Type"], float(plan["Total Cost"])


def main() -> None:
    workload = load_workload(HERE / "workload.toml")
    sweep = workload.query("sum_range").sweep
    assert sweep is not None
    settings = dict(workload.targets[0].settings)
    rows: dict[tuple[str, int], dict[int, str]] = {}
    majors = []
    for major in (15, 17, 18):
        try:
            installation = find_installation(major)
        except PlanshiftError as exc:
            print(f"PostgreSQL {major}: skipped ({exc})", file=sys.stderr)
            continue
        majors.append(major)
        cluster = EmbeddedCluster(installation, name=f"costs-pg{major}", settings=settings)
        with cluster, psycopg.connect(cluster.conninfo, autocommit=True) as conn:
            for statement in workload.setup:
                conn.execute(statement.encode())
            for work_mem in ("64kB", "4MB"):
                for n in sweep.values:
                    chosen, cost = plan_cost(conn, n, work_mem, None)
                    _, index = plan_cost(conn, n, work_mem, "index")
                    _, bitmap = plan_cost(conn, n, work_mem, "bitmap")
                    short = SHORT.get(chosen, chosen)
                    cell = f"{index:.0f} / {bitmap:.0f} -> {short} {cost:.0f}"
                    rows.setdefault((work_mem, n), {})[major] = cell
    print(
        "sum_range: cost of the Index Scan plan / the Bitmap Heap Scan plan -> chosen scan, its cost\n"
    )
    print("| work_mem | N | " + " | ".join(f"PG {m}" for m in majors) + " |")
    print("|---|---:|" + "---|" * len(majors))
    for (work_mem, n), by_major in rows.items():
        print(f"| {work_mem} | {n} | " + " | ".join(by_major[m] for m in majors) + " |")


if __name__ == "__main__":
    main()
