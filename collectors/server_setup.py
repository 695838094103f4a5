"""A workload's [setup] SQL on a server: run on embedded clusters, only checked on --dsn ones.

Setup on a server someone else runs (a `--dsn` target) needs the consent of the person running
the command: `--setup`, or PLANSHIFT_ALLOW_SETUP=1 in the environment of a CI job (set by whoever
writes the pipeline, not by the workload it runs). The workload file cannot consent for itself:
`[setup] on_dsn = "run"` only says that the setup is meant to run there, so without consent the
run is refused before anything is written, instead of checking that the tables exist.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import psycopg

from collectors.servers.targets import Server
from detector.errors import PlanshiftError
from detector.model.statements import setup_relations
from detector.model.workload import TargetSpec, Workload

CONSENT_VARIABLE = "PLANSHIFT_ALLOW_SETUP"


def setup_consent(flag: bool) -> bool:
    """--setup on the command line, or PLANSHIFT_ALLOW_SETUP=1 (CI)."""
    return flag or os.environ.get(CONSENT_VARIABLE, "") == "1"


def check_setup_consent(workload: Workload, specs: Sequence[TargetSpec], consent: bool) -> None:
    """Refuse a workload whose file asks for setup on --dsn targets the user did not consent to
    (before a store or a server is touched)."""
    if consent or not workload.setup_on_dsn:
        return
    servers = [s.name for s in specs if s.postgres is None and (workload.setup or s.setup)]
    if servers:
        raise refusal(workload, ", ".join(servers))


def refusal(workload: Workload, servers: str) -> PlanshiftError:
    return PlanshiftError(
        f"{workload.path.name} asks to run its [setup] ({len(workload.setup)} statements) on "
        f'--dsn target {servers} (on_dsn = "run"); a workload file cannot consent to changing '
        "a server, the person running planshift does",
        f"pass --setup to run it there (in CI: {CONSENT_VARIABLE}=1), or create the tables "
        'yourself and set on_dsn = "check"',
    )


def setup_plan(workload: Workload, server: Server) -> tuple[str, ...]:
    """The statements that will run on `server` (the workload's, then the target's own)."""
    return (*workload.setup, *server.setup)


def describe_setup(workload: Workload, server: Server) -> str:
    """What setup will run where, said before it runs on a --dsn server."""
    own = f" + {len(server.setup)} of target {server.name}" if server.setup else ""
    return (
        f"setup on {server.name} ({server.redacted}): {len(workload.setup)} statements of "
        f"{workload.path.name} [setup]{own}, as asked (--setup)"
    )


def prepare_server(
    server: Server, conn: psycopg.Connection[Any], workload: Workload, run_setup_on_dsn: bool
) -> None:
    """Run the workload's setup, then the target's own, on embedded clusters; on a --dsn
    server only with the user's consent (`run_setup_on_dsn`), otherwise check that the
    relations the setup would create are there."""
    statements = setup_plan(workload, server)
    if server.source != "dsn" or run_setup_on_dsn:
        run_setup(server, conn, statements)
        return
    if workload.setup_on_dsn and statements:
        raise refusal(workload, server.name)
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
            "create them yourself, or pass --setup to run the workload's setup SQL on that "
            f"server (in CI: {CONSENT_VARIABLE}=1)",
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
