"""One query's samples on every side: the parameters of sample i run on every side back to back
(`rotated` order), primed, as EXPLAIN ANALYZE in the workload's timing mode, each execution in
its own rolled-back transaction (collectors/session.py).

An execution PostgreSQL refuses is recorded and skipped (collectors/failures.py): the other
sides still run that sample, and the failing side the next one, so sample i keeps the same
parameters and the same place in the rotation on every side and the samples that worked on
both sides stay paired; a side stops trying a query that never worked there."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

import psycopg

from collectors.attribution import PLAN_ONLY
from collectors.cache import Eviction
from collectors.failures import FailureTracker, is_servers_fault, server_failure
from collectors.generic_plans import generic_plan
from collectors.servers.targets import redact_secrets
from collectors.session import SettingsRefused, one_statement
from collectors.sides import LiveSide, RunOptions, rotated
from detector.errors import PlanshiftError
from detector.model import Observation, parse_plan
from detector.model.failures import QueryFailure
from detector.model.workload import Query, Workload

# measured executions skip per-node timing by default: its cost grows with the rows a plan
# moves, so it would skew a hash join against a nested loop (TIMING = "on" keeps it)
EXPLAIN = {
    "off": "EXPLAIN (ANALYZE, TIMING OFF, BUFFERS, SETTINGS, FORMAT JSON) ",
    "on": "EXPLAIN (ANALYZE, BUFFERS, SETTINGS, FORMAT JSON) ",
    "plan": "EXPLAIN (SETTINGS, FORMAT JSON) ",  # plan-only: nothing is executed
}

ProgressCallback = Callable[[str, int], None]


class Measured(NamedTuple):
    """One query's measured executions at one sweep point, and the executions that failed."""

    observations: list[Observation]
    failures: list[QueryFailure]


def measure(
    workload: Workload,
    query: Query,
    key: str,
    point: str | None,
    fixed: dict[str, Any],
    sides: Sequence[LiveSide],
    options: RunOptions,
    progress: ProgressCallback | None,
    after_first: Callable[[], None] | None = None,
    before_sample: Callable[[], None] | None = None,
) -> Measured:
    """`after_first` runs once every side has executed the query once (its first, unmeasured
    execution when there is a warm-up or priming): the server-state check. `before_sample` runs
    before each sample's executions on every side (the host monitor: a reading, a pause while
    the load is too high), so a pause never splits a pair."""
    tracker = FailureTracker(query, key, point)
    label = f"{query.name} {point or ''}".strip()

    def tick() -> None:
        if progress is not None:
            progress(label, 1)

    if query.generic_plan:
        planned = _generic_observations(query, key, sides, options, tick, tracker)
        return Measured(planned, tracker.failures)
    reps = options.repetitions or query.repetitions or workload.repetitions
    warmup = workload.warmup if options.warmup is None else options.warmup
    rng = random.Random(f"{workload.seed}:{query.name}:{point}")
    cold = workload.cache_of(query) == "cold"
    observations: list[Observation] = []
    for index in range(warmup + reps):
        params = query.parameters(rng, index, fixed)
        measured = index >= warmup
        if before_sample is not None:
            before_sample()
        # priming: the first execution with new parameters reads their pages into shared
        # buffers and the next ones hit them; without it each side's timings mix both cases
        # (a cold trial is the opposite: it evicts them before each measured execution)
        passes = (False, True) if measured and workload.prime and not cold else (measured,)
        for recorded in passes:
            phase = "measurement" if recorded else ("priming" if measured else "warmup")
            for side in rotated(sides, index):
                if tracker.stopped(side):
                    tick()
                    continue
                sample = index - warmup
                try:
                    if recorded and cold and side.eviction is not None:
                        relations = _relations(side, query, params, options.statement_timeout)
                        _evict(side, side.eviction, relations, query)
                    plan_json, plain_ms, client_ms = _execute(
                        side, query, params, options.statement_timeout, workload.timing
                    )
                except SettingsRefused as exc:
                    raise _refused(side, exc) from exc
                except psycopg.Error as exc:
                    tracker.failed(exc, side, sample, phase, params)
                    tick()
                    continue
                tracker.worked(side)
                tick()
                if recorded:
                    observation = _observation(
                        side, key, params, plan_json, client_ms, sample, point, plain_ms
                    )
                    side.check_settings(observation.plan, label)
                    observations.append(observation)
            if after_first is not None:
                after_first()
                after_first = None
    return Measured(observations, tracker.failures)


def _evict(side: LiveSide, eviction: Eviction, relations: list[str], query: Query) -> None:
    """Make what the statement reads cold. Not the statement's doing: a failure here is never
    the query's (it raises PlanshiftError, or ServerFailure when the server is at fault)."""
    try:
        eviction.evict(side.connection, relations)
    except psycopg.Error as exc:
        where = f"evicting the relations of query {query.name} ({', '.join(relations)})"
        if is_servers_fault(exc, side.connection):
            raise server_failure(exc, side.name, side.server.conninfo, where) from exc
        message = redact_secrets(" ".join(str(exc).split()), side.server.conninfo)
        raise PlanshiftError(
            f"{where} failed on {side.name}: {message}",
            "cold trials need pg_buffercache_evict (PostgreSQL 17+) and rights on the relations; "
            "run with --cache warm",
        ) from exc


def _refused(side: LiveSide, exc: SettingsRefused) -> PlanshiftError:
    shown = ", ".join(f"{name} = {value}" for name, value in side.gucs.items()) or "none"
    return PlanshiftError(
        f"{side.name} refused its settings ({shown}): {str(exc).strip()}",
        "a variant's setting this server does not have or accept: check it with SHOW on that "
        "server, or give the variants settings every target's version knows",
    )


def _execute(
    side: LiveSide, query: Query, params: dict[str, Any], timeout: str, timing: str
) -> tuple[str, float | None, float]:
    """(EXPLAIN JSON, duration ms, client ms) of one execution in the workload's timing mode:
    the server's Execution Time under EXPLAIN ANALYZE, or in "plain" mode the round trip of
    the bare statement (its plan from an EXPLAIN ANALYZE, TIMING OFF run just before)."""
    # a query without placeholders is sent as written: `LIKE 'PROMO%'` keeps its `%`
    bound = params if query.placeholders else None
    gucs = _gucs(side, timeout)
    plan_json, client_ms = one_statement(
        side.connection, EXPLAIN.get(timing, EXPLAIN["off"]) + query.sql, bound, gucs
    )
    if timing != "plain":
        return str(plan_json), None, client_ms
    _, plain_ms = one_statement(side.connection, query.sql, bound, gucs, first_value=False)
    return str(plan_json), plain_ms, plain_ms


def _gucs(side: LiveSide, timeout: str) -> dict[str, str]:
    return {"statement_timeout": timeout, **side.gucs}


def _relations(side: LiveSide, query: Query, params: dict[str, Any], timeout: str) -> list[str]:
    """The relations the statement's plan for these parameters reads (EXPLAIN, not executed)."""
    bound = params if query.placeholders else None
    plan_json, _ = one_statement(
        side.connection, PLAN_ONLY + query.sql, bound, _gucs(side, timeout)
    )
    plan = parse_plan(str(plan_json))
    return sorted(
        {
            f"{node.schema}.{node.relation}" if node.schema else node.relation
            for _, node in plan.nodes()
            if node.relation
        }
    )


def _observation(
    side: LiveSide,
    key: str,
    params: dict[str, Any],
    plan_json: str,
    client_ms: float,
    sample_index: int,
    point: str | None,
    plain_ms: float | None,
) -> Observation:
    plan = parse_plan(plan_json)
    return Observation(
        target_id=side.target_id,
        query_key=key,
        params=json.dumps(params, sort_keys=True, default=str),
        plan=plan,
        plan_json=plan_json,
        duration_ms=plan.execution_ms if plain_ms is None else plain_ms,
        planning_ms=plan.planning_ms,
        client_ms=client_ms,
        sample_index=sample_index,
        collected_at=datetime.now(UTC),
        point=point,
    )


def _generic_observations(
    query: Query,
    key: str,
    sides: Sequence[LiveSide],
    options: RunOptions,
    tick: Callable[[], None],
    tracker: FailureTracker,
) -> list[Observation]:
    """One plan-only observation per side: no timings, labelled by the plan's missing analysis."""
    observations = []
    for side in sides:
        try:
            gucs = _gucs(side, options.statement_timeout)
            version = int(side.server.info.get("server_version_num") or 0)
            plan_json = generic_plan(side.connection, query.sql, gucs, version)
        except psycopg.Error as exc:
            tracker.failed(exc, side, 0, "generic plan", {})
            tick()
            continue
        tick()
        observations.append(
            Observation(
                target_id=side.target_id,
                query_key=key,
                params="[]",
                plan=parse_plan(plan_json),
                plan_json=plan_json,
                duration_ms=None,
                planning_ms=None,
                client_ms=None,
                sample_index=0,
                collected_at=datetime.now(UTC),
            )
        )
    return observations
