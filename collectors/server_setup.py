"""A workload's [setup] SQL on a server: run on embedded clusters, only checked on --dsn ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from collectors.servers.targets import Server
from detector.errors import PlanshiftError
from detector.model.statements import setup_relations
from detector.model.workload import Workload


def prepare_server(
    server: Server, conn: psycopg.Connection[Any], workload: Workload, run_setup_on_dsn: bool
) -> None:
    """Run the workload's setup, then the target's own, on embedded clusters; on a --dsn
    server only when asked, otherwise check that the relations the setup would create are
    there."""
    statements = (*workload.setup, *server.setup)
    if server.source != "dsn" or run_setup_on_dsn or workload.setup_on_dsn:
        run_setup(server, conn, statements)
        return
    relations = setup_relations(statements)
    if not relations:
        return
    rows = conn.execute(
        "SELECT name FROM unnest(%s::text[]) AS name WHERE to_regclass(name) IS NULL", [relations]
    ).fetchall()
    missing = [str(row[0]) for row in rows]
    if missing:
        raise PlanshiftError(
            f"target {server.name} ({server.redacted}) lacks {', '.join(missing)}, which the "
            "workload's [setup] creates; planshift does not run setup on a --dsn server unasked",
            'create them yourself, or pass --setup (or [setup] on_dsn = "run") to run the '
            "workload's setup SQL on that server",
        )


def run_setup(server: Server, conn: psycopg.Connection[Any], statements: Sequence[str]) -> None:
    for index, statement in enumerate(statements):
        try:
            conn.execute(statement.encode())
        except psycopg.Error as exc:
            raise PlanshiftError(
                f"setup statement {index + 1} failed on {server.name}: {str(exc).strip()}",
                f"statement: {statement[:200]}",
            ) from exc
