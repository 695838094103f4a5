"""Plan-only queries: the generic plan of SQL written with $1, $2 ... placeholders."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import psycopg

from detector.errors import PlanshiftError
from detector.model.statements import statement_count

GENERIC_EXPLAIN = "EXPLAIN (GENERIC_PLAN, SETTINGS, FORMAT JSON) "
PREPARED_NAME = "planshift_generic"


def generic_plan(
    conn: psycopg.Connection[Any], sql: str, gucs: Mapping[str, str], version: int
) -> str:
    """The generic plan of SQL with $n placeholders, without executing it.

    PostgreSQL 16+ has EXPLAIN (GENERIC_PLAN); before that, PREPARE the statement and EXPLAIN
    EXECUTE it with NULL arguments under plan_cache_mode = force_generic_plan, which plans
    without looking at the argument values; pipeline mode sends the PREPARE with the extended
    protocol, which keeps it a single statement.
    """
    gucs = dict(gucs)
    setters = ", ".join("set_config(%s, %s, true)" for _ in gucs)
    if version >= 160000:
        # the extended protocol would ask for values of the $n placeholders: this one statement
        # goes as a simple query, so the parser must first find exactly one statement in it
        if statement_count(sql) != 1:
            raise PlanshiftError("a generic_plan query must be exactly one statement")
        with conn.cursor() as cur, conn.transaction(force_rollback=True):
            cur.execute(f"SELECT {setters}", [item for pair in gucs.items() for item in pair])
            cur.execute(GENERIC_EXPLAIN + sql)
            row = cur.fetchone()
        if row is None:
            raise PlanshiftError("EXPLAIN returned no row")
        return str(row[0])
    gucs["plan_cache_mode"] = "force_generic_plan"
    setters = ", ".join("set_config(%s, %s, true)" for _ in gucs)
    with conn.pipeline(), conn.cursor() as cur, conn.transaction(force_rollback=True):
        cur.execute(f"SELECT {setters}", [item for pair in gucs.items() for item in pair])
        cur.execute(f"PREPARE {PREPARED_NAME} AS {sql}")
        try:
            cur.execute(
                "SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = %s",
                [PREPARED_NAME],
            )
            count_row = cur.fetchone()
            nulls = ", ".join(["NULL"] * int(count_row[0] if count_row else 0))
            arguments = f"({nulls})" if nulls else ""
            cur.execute(f"EXPLAIN (SETTINGS, FORMAT JSON) EXECUTE {PREPARED_NAME}{arguments}")
            row = cur.fetchone()
        finally:
            cur.execute(f"DEALLOCATE {PREPARED_NAME}")
    if row is None:
        raise PlanshiftError("EXPLAIN returned no row")
    return _without_forced_mode(row[0])


def _without_forced_mode(plan: Any) -> str:
    """The plan's Settings without the plan_cache_mode set here to get the generic plan: it is
    how the plan was asked for, not a setting of the side (a report would name it as one).
    `plan`: JSON text, or already parsed (a session without planshift's text loader)."""
    document = json.loads(plan) if isinstance(plan, str | bytes) else plan
    for entry in document if isinstance(document, list) else [document]:
        settings = entry.get("Settings") if isinstance(entry, dict) else None
        if isinstance(settings, dict):
            settings.pop("plan_cache_mode", None)
            if not settings:
                del entry["Settings"]
    return json.dumps(document)
