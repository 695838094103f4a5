"""The EXPLAIN runner: every query x parameter sample on every server x variant, interleaved.

After the warm-up, sample i of a query runs on every side before sample i+1 (A B, B A, ...), with
the same parameter values on every side, so drift (cache, autovacuum, a noisy neighbour) hits
all sides alike; the side that goes first rotates, so the cache one execution warms for the
next favours no side. Each statement runs as `EXPLAIN (ANALYZE, TIMING OFF, BUFFERS, SETTINGS,
FORMAT JSON)` (the workload's `timing` mode: "off", "on" or "plain") in a
transaction that is always rolled back, with the variant's GUCs set by
`set_config(name, value, true)` inside that transaction, in one session per server
(collectors/session.py says how a statement is kept from ending that transaction and what is
reset after each execution and each query).
"""

from __future__ import annotations

import json
import random
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import groupby
from typing import Any

import psycopg

from collectors.attribution import PLAN_ONLY, attribute, counterfactual, first_difference, unforced
from collectors.cache import Eviction, prepare_eviction
from collectors.generic_plans import generic_plan
from collectors.server_info import describe_server
from collectors.server_setup import prepare_server
from collectors.servers.targets import Server
from collectors.session import ExecutionFailed, connect, executions, one_statement, reset_session
from detector.errors import PlanshiftError
from detector.model import Observation, Plan, fingerprint, parse_plan
from detector.model.identity import workload_query_key
from detector.model.sink import RunSink
from detector.model.workload import Query, Workload
from detector.version import __version__

# measured executions skip per-node timing by default: its cost grows with the rows a plan
# moves, so it would skew a hash join against a nested loop (TIMING = "on" keeps it)
EXPLAIN = {
    "off": "EXPLAIN (ANALYZE, TIMING OFF, BUFFERS, SETTINGS, FORMAT JSON) ",
    "on": "EXPLAIN (ANALYZE, BUFFERS, SETTINGS, FORMAT JSON) ",
    "plan": "EXPLAIN (SETTINGS, FORMAT JSON) ",  # plan-only: nothing is executed
}

ProgressCallback = Callable[[str, int], None]
COUNTERFACTUAL_SAMPLES = 10  # the rejected plan, timed on the candidate: pairs of executions


@dataclass
class Side:
    """One server x variant: what the store calls a target."""

    server: Server
    variant: str
    gucs: dict[str, str]
    connection: psycopg.Connection[Any]
    target_id: int = 0
    name: str = ""
    eviction: Eviction | None = None  # how cold trials are made on this side's server
    # per query: the planner settings EXPLAIN (SETTINGS) showed for its first measured plan on
    # this side; every later plan must show the same, or something changed settings mid-run
    settings: dict[str, Mapping[str, str]] = field(default_factory=dict)

    def check_settings(self, plan: Plan, query: str) -> None:
        first = self.settings.setdefault(query, plan.settings)
        if plan.settings != first:
            changed = sorted(set(plan.settings.items()) ^ set(first.items()))
            raise PlanshiftError(
                f"the planner settings of {self.name} changed during the run, at query {query}: "
                f"{', '.join(f'{k}={v}' for k, v in changed)}",
                "something outside planshift (ALTER SYSTEM and a reload, ALTER DATABASE) changed "
                "settings; rerun on a server nobody else reconfigures meanwhile",
            )


@dataclass(frozen=True)
class RunOptions:
    label: str = ""
    kind: str = "run"  # of the stored run: run, or noise for an A/A run
    repetitions: int | None = None
    warmup: int | None = None
    statement_timeout: str = "60s"
    queries: tuple[str, ...] = ()  # only these query names (default: all)
    setup_on_dsn: bool = False  # run the workload's [setup] on --dsn servers too
    cache: str | None = None  # "warm" | "cold" for every query (--cache), else the workload's
    side_names: dict[tuple[str, str], str] = field(default_factory=dict)
    timing: str = "off"  # set from the workload's: with "plan", no statement is executed


def side_name(server: str, variant: str, servers: int, variants: int) -> str:
    """`pg15/fast` in general; just the variant (or server) when the other has one value."""
    if servers == 1 and variants > 1:
        return variant
    if variants == 1:
        return server
    return f"{server}/{variant}"


def query_key(query: Query) -> str:
    return workload_query_key(query.name)


Step = tuple[bool, Side]  # (recorded, side) of one execution of a sample


def _run_steps(
    steps: Sequence[Step],
    query: Query,
    params: dict[str, Any],
    timeout: str,
    timing: str,
    cold: bool,
) -> Iterator[tuple[bool, Side, tuple[str, float | None, float]]]:
    """Each step's (EXPLAIN JSON, duration ms, client ms), in order, in the workload's timing
    mode: the server's Execution Time under EXPLAIN ANALYZE, or in "plain" mode the round trip
    of the bare statement (its plan from an EXPLAIN ANALYZE, TIMING OFF run just before).

    Consecutive steps on one session are sent as one batch (`session.executions`: the next is
    sent while the server runs the current one) except in plain mode, whose timing is the
    round trip, and for cold caches, evicted before each measured execution."""
    # a query without placeholders is sent as written: `LIKE 'PROMO%'` keeps its `%`
    bound = params if query.placeholders else None
    explain = EXPLAIN.get(timing, EXPLAIN["off"])
    if timing == "plain" or cold:
        groups = [[step] for step in steps]
    else:
        groups = [list(group) for _, group in groupby(steps, key=lambda s: id(s[1].connection))]
    for group in groups:
        connection = group[0][1].connection
        for recorded, side in group:
            if recorded and cold and side.eviction is not None:
                side.eviction.evict(connection, _relations(side, query, params, timeout))
        try:
            results = executions(
                connection,
                [(explain + query.sql, bound, _gucs(side, timeout)) for _, side in group],
            )
            plain = [
                executions(connection, [(query.sql, bound, _gucs(side, timeout))], False)[0][1]
                if timing == "plain"
                else None
                for _, side in group
            ]
        except (ExecutionFailed, psycopg.Error) as exc:
            failed = exc.error if isinstance(exc, ExecutionFailed) else exc
            side = group[exc.position if isinstance(exc, ExecutionFailed) else 0][1]
            raise PlanshiftError(
                f"query {query.name} failed on {side.name}: {str(failed).strip()}",
                f"parameters: {json.dumps(params, default=str)}",
            ) from failed
        for (recorded, side), (plan_json, client_ms), plain_ms in zip(
            group, results, plain, strict=True
        ):
            yield (
                recorded,
                side,
                (str(plan_json), plain_ms, client_ms if plain_ms is None else plain_ms),
            )


def _gucs(side: Side, timeout: str) -> dict[str, str]:
    return {"statement_timeout": timeout, **side.gucs}


def rotated(sides: Sequence[Side], index: int) -> list[Side]:
    """The order of sample i: servers rotate, and within each server its variants rotate.

    The first execution of a sample on a server reads pages cold for those parameters and warms
    them for the server's next variants; rotating within each server makes every variant go
    first on its server equally often (rotating the flat list would not: with two servers the
    first variant of each would always follow the other server's execution, i.e. run cold).
    """
    servers = list(dict.fromkeys(side.server.name for side in sides))
    shift = index % len(servers)
    order: list[Side] = []
    for name in servers[shift:] + servers[:shift]:
        group = [side for side in sides if side.server.name == name]
        first = index % len(group)
        order.extend(group[first:] + group[:first])
    return order


def plan_count(workload: Workload, sides: int, options: RunOptions) -> int:
    total = 0
    for query in _selected(workload, options):
        if query.generic_plan:
            total += sides
            continue
        reps = options.repetitions or query.repetitions or workload.repetitions
        warmup = workload.warmup if options.warmup is None else options.warmup
        cold = (options.cache or workload.cache_of(query)) == "cold"
        executions = reps * (2 if workload.prime and not cold else 1) + warmup
        total += len(query.points()) * executions * sides
    return total


def _selected(workload: Workload, options: RunOptions) -> list[Query]:
    if not options.queries:
        return list(workload.queries)
    return [workload.query(name) for name in options.queries]


def run_workload(
    workload: Workload,
    servers: Sequence[Server],
    store: RunSink,
    options: RunOptions,
    progress: ProgressCallback | None = None,
) -> int:
    """Run the workload on every server x variant and store each measured execution; returns the run id."""
    run_id = store.begin_run(
        options.label or workload.name,
        workload_hash=workload.content_hash,
        tool_version=__version__,
        host=socket.gethostname(),
        kind=options.kind,
    )
    sides: list[Side] = []
    options = replace(options, timing=workload.timing)
    try:
        if options.cache is not None:
            workload = replace(
                workload,
                cache=options.cache,
                queries=tuple(replace(q, cache=None) for q in workload.queries),
            )
        cold = any(workload.cache_of(q) == "cold" for q in _selected(workload, options))
        for server in servers:
            with connect(server) as conn:
                prepare_server(server, conn, workload, options.setup_on_dsn)
                server.info.update(describe_server(conn))
                eviction = prepare_eviction(server, conn) if cold else None
            server.info["cache"] = eviction.describe() if eviction else {"mode": "warm"}
            # one session per server, shared by its variants: separate backends measured a
            # consistent 15-30% A/A difference on 0.05 ms queries on a loaded machine, and
            # nothing a statement can do survives its execution (session.one_statement)
            session = connect(server)
            for variant, gucs in workload.variants.items():
                sides.append(Side(server, variant, dict(gucs), session, eviction=eviction))
        for side in sides:
            side.name = side_name(
                side.server.name, side.variant, len(servers), len(workload.variants)
            )
            side.target_id = store.add_target(
                run_id,
                side.name,
                source=side.server.source,
                server_version_num=side.server.info.get("server_version_num"),
                gucs=side.gucs,
                info={
                    **side.server.info,
                    "server": side.server.name,
                    "variant": side.variant,
                    "timing": workload.timing,
                },
            )
        for query in _selected(workload, options):
            key = query_key(query)
            store.upsert_query(key, name=query.name, sql=query.sql)
            for point, fixed in query.points():
                measured = _measure(workload, query, key, point, fixed, sides, options, progress)
                store.add_observations(measured)
                _attribute_flips(store, query, key, point, sides, measured, options)
            for side in {id(side.connection): side for side in sides}.values():
                reset_session(side.connection, f"query {query.name} on {side.server.name}")
        store.finish_run(run_id)
    except BaseException:
        store.finish_run(run_id, "failed")
        raise
    finally:
        for conn in {id(side.connection): side.connection for side in sides}.values():
            conn.close()
    return run_id


def _measure(
    workload: Workload,
    query: Query,
    key: str,
    point: str | None,
    fixed: dict[str, Any],
    sides: Sequence[Side],
    options: RunOptions,
    progress: ProgressCallback | None,
) -> list[Observation]:
    if query.generic_plan:
        return _generic_observations(query, key, sides, options, progress)
    reps = options.repetitions or query.repetitions or workload.repetitions
    warmup = workload.warmup if options.warmup is None else options.warmup
    rng = random.Random(f"{workload.seed}:{query.name}:{point}")
    cold = workload.cache_of(query) == "cold"
    observations: list[Observation] = []
    for index in range(warmup + reps):
        params = query.parameters(rng, index, fixed)
        measured = index >= warmup
        # priming: the first execution with new parameters reads their pages into shared
        # buffers and the next ones hit them; without it each side's timings mix both cases
        # (a cold trial is the opposite: it evicts them before each measured execution)
        passes = (False, True) if measured and workload.prime and not cold else (measured,)
        steps = [(recorded, side) for recorded in passes for side in rotated(sides, index)]
        for recorded, side, (plan_json, plain_ms, client_ms) in _run_steps(
            steps, query, params, options.statement_timeout, workload.timing, cold
        ):
            if progress is not None:
                progress(f"{query.name} {point or ''}".strip(), 1)
            if recorded:
                observation = _observation(
                    side, key, params, plan_json, client_ms, index - warmup, point, plain_ms
                )
                side.check_settings(observation.plan, f"{query.name} {point or ''}".strip())
                observations.append(observation)
    return observations


def _attribute_flips(
    store: RunSink,
    query: Query,
    key: str,
    point: str | None,
    sides: Sequence[Side],
    observations: Sequence[Observation],
    options: RunOptions,
) -> None:
    """For sides that chose different plans for the same parameters: which settings did it
    (collectors/attribution.py), filed in the candidate target's info."""
    if query.generic_plan:
        return
    by_name = {side.name: side for side in sides}
    by_target = {side.target_id: side.name for side in sides}
    plans = {(by_target[o.target_id], o.sample_index): fingerprint(o.plan) for o in observations}
    params = {o.sample_index: json.loads(o.params) for o in observations}
    for baseline, candidate, index in first_difference(sides, plans):
        try:
            found = attribute(
                baseline,
                candidate,
                query.sql,
                params[index] if query.placeholders else None,
                plans[(baseline.name, index)],
                index,
                options.statement_timeout,
            )
            info = found.as_info()
            if not found.rejected_plan_settings and options.timing != "plan":
                info["counterfactual"] = unforced(found)
            elif options.timing != "plan":
                samples = [params[i] if query.placeholders else None for i in sorted(params)]
                info["counterfactual"] = counterfactual(
                    found,
                    candidate,
                    query.sql,
                    samples[:COUNTERFACTUAL_SAMPLES],
                    plans[(baseline.name, index)],
                    options.statement_timeout,
                )
        except (
            psycopg.Error
        ) as exc:  # the measurements stand; say why the test of the cause did not
            info = {"error": str(exc).strip()}
        store.file_target_info(
            by_name[candidate.name].target_id,
            "attribution",
            f"{key}|{point or ''}",
            {baseline.name: info},
        )


def _relations(side: Side, query: Query, params: dict[str, Any], timeout: str) -> list[str]:
    """The relations the statement's plan for these parameters reads (EXPLAIN, not executed)."""
    bound = params if query.placeholders else None
    gucs = {"statement_timeout": timeout, **side.gucs}
    plan_json, _ = one_statement(side.connection, PLAN_ONLY + query.sql, bound, gucs)
    plan = parse_plan(str(plan_json))
    return sorted(
        {
            f"{node.schema}.{node.relation}" if node.schema else node.relation
            for _, node in plan.nodes()
            if node.relation
        }
    )


def _observation(
    side: Side,
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
    sides: Sequence[Side],
    options: RunOptions,
    progress: ProgressCallback | None,
) -> list[Observation]:
    """One plan-only observation per side: no timings, labelled by the plan's missing analysis."""
    observations = []
    for side in sides:
        try:
            gucs = {"statement_timeout": options.statement_timeout, **side.gucs}
            version = int(side.server.info.get("server_version_num") or 0)
            plan_json = generic_plan(side.connection, query.sql, gucs, version)
        except psycopg.Error as exc:
            raise PlanshiftError(
                f"generic plan of {query.name} failed on {side.name}: {str(exc).strip()}",
                "generic_plan queries use $1, $2 ... placeholders whose types PostgreSQL can infer",
            ) from exc
        if progress is not None:
            progress(query.name, 1)
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
