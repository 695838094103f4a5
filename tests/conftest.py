"""Shared fixtures: real embedded PostgreSQL clusters per major version, and fresh databases."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from collectors.servers.embedded import EmbeddedCluster
from collectors.servers.installations import Installation, discover, find_installation
from detector.errors import PlanshiftError

# `python -m detector` in a subprocess must import the installed planshift, not ./detector
os.environ["PYTHONSAFEPATH"] = "1"

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "logs"))
from capture_logs import capture, mixed_workload
from helpers import INSTALL_HOW, SUPPORTED_MAJORS, FreshDb


def _cluster(major: int) -> Iterator[EmbeddedCluster]:
    try:
        installation = find_installation(major)
    except PlanshiftError as exc:
        pytest.skip(f"PostgreSQL {major} is not available ({exc}): {INSTALL_HOW[major]}")
    cluster = EmbeddedCluster(installation, name=f"test-pg{major}")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


# a test that uses one of these (directly or through another fixture) starts PostgreSQL
PG_FIXTURES = {f"pg{major}" for major in SUPPORTED_MAJORS} | {
    "pg_any",
    "installations",
    "fresh_db",
    "live_logs",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that starts PostgreSQL `pg`, so `pytest -m "not pg"` runs the rest
    on a machine without it; modules whose tests start servers another way mark themselves."""
    for item in items:
        if PG_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.pg)


@pytest.fixture(scope="session")
def installations() -> list[Installation]:
    return discover()


@pytest.fixture(scope="session")
def pg14() -> Iterator[EmbeddedCluster]:
    yield from _cluster(14)


@pytest.fixture(scope="session")
def pg15() -> Iterator[EmbeddedCluster]:
    yield from _cluster(15)


@pytest.fixture(scope="session")
def pg16() -> Iterator[EmbeddedCluster]:
    yield from _cluster(16)


@pytest.fixture(scope="session")
def pg17() -> Iterator[EmbeddedCluster]:
    yield from _cluster(17)


@pytest.fixture(scope="session")
def pg18() -> Iterator[EmbeddedCluster]:
    yield from _cluster(18)


@pytest.fixture(params=[f"pg{major}" for major in SUPPORTED_MAJORS], ids=str)
def pg_any(request: pytest.FixtureRequest) -> EmbeddedCluster:
    cluster: EmbeddedCluster = request.getfixturevalue(request.param)
    return cluster


@pytest.fixture
def fresh_db() -> Iterator[FreshDb]:
    """`fresh_db(cluster)` -> conninfo of a new, empty database, dropped after the test."""
    created: list[tuple[EmbeddedCluster, str]] = []

    def make(cluster: EmbeddedCluster) -> str:
        name = f"test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(cluster.conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        created.append((cluster, name))
        return psycopg.conninfo.make_conninfo(cluster.conninfo, dbname=name)

    yield make
    for cluster, name in created:
        if not cluster.running:
            continue
        with psycopg.connect(cluster.conninfo, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


_LOGS: dict[int, Path] = {}


@pytest.fixture(scope="session")
def live_logs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], Path]:
    """Logs written by a real cluster of that major version during this test session."""

    def logs(major: int) -> Path:
        if major not in _LOGS:
            try:
                find_installation(major)
            except PlanshiftError:
                pytest.skip(f"PostgreSQL {major} is not installed")
            out = tmp_path_factory.mktemp(f"logs{major}")
            _LOGS[major] = capture(major, out, mixed_workload)
        return _LOGS[major]

    return logs
