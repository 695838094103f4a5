"""The EXPLAIN runner: every query x parameter sample on every server x variant, interleaved.

After the warm-up, sample i of a query runs on every side before sample i+1 (A B, B A, ...), with
the same parameter values on every side, so drift (cache, autovacuum, a noisy neighbour) hits
all sides alike; the side that goes first rotates, so the cache one execution warms for the
next favours no side. Each statement runs as `EXPLAIN (ANALYZE, TIMING OFF, BUFFERS, SETTINGS,
FORMAT JSON)` (the workload's `timing` mode: "off", "on" or "plain") in a
transaction that is always rolled back, with the variant's GUCs set by
`set_config(name, value, true)` inside that transaction, in one session per server
(collectors/session.py says how a statement is kept from ending that transaction and what is
reset after each execution and each query). collectors/sampling.py measures one query's
samples; collectors/sides.py holds the sides and their order.

A statement PostgreSQL refuses on a side is recorded with its error (table query_failures) and
the run goes on (collectors/failures.py); a failure that is the server's fault ends the run,
which the store keeps, marked failed, with what it measured before and why it stopped.
"""

from __future__ import annotations

import functools
import socket
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import replace

import psycopg

from collectors.cache import prepare_eviction
from collectors.failures import ServerFailure, server_failure
from collectors.flips import attribute_flips, file_flips
from collectors.host import HostMonitor, is_local
from collectors.sampling import ProgressCallback, measure
from collectors.server_info import describe_server
from collectors.server_setup import prepare_servers
from collectors.server_state import ServerWatch
from collectors.servers.targets import Server, redact_secrets
from collectors.session import connect, reset_session
from collectors.sides import LiveSide, side_name
from collectors.sides import RunOptions as RunOptions  # re-exported: the run's API
from detector.errors import PlanshiftError
from detector.model import Observation
from detector.model.identity import workload_query_key
from detector.model.sink import RunSink
from detector.model.workload import Query, Workload
from detector.version import __version__


def query_key(query: Query) -> str:
    return workload_query_key(query.name)


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
    sides: list[LiveSide] = []
    options = replace(options, timing=workload.timing, prime=workload.prime)
    watch = ServerWatch()  # what outlives the rollbacks on --dsn servers (server_state.py)
    monitor = None
    try:
        if options.cache is not None:
            workload = replace(
                workload,
                cache=options.cache,
                queries=tuple(replace(q, cache=None) for q in workload.queries),
            )
        cold = any(workload.cache_of(q) == "cold" for q in _selected(workload, options))
        settings = prepare_servers(servers, workload, options.setup_on_dsn, progress)
        for server in servers:
            with connect(server) as conn:
                server.info.update(describe_server(conn))
                eviction = prepare_eviction(server, conn) if cold else None
            server.info["cache"] = eviction.describe() if eviction else {"mode": "warm"}
            # one session per server, shared by its variants: separate backends measured a
            # consistent 15-30% A/A difference on 0.05 ms queries on a loaded machine, and
            # nothing a statement can do survives its execution (session.one_statement)
            session = connect(server)
            for variant, gucs in workload.variants.items():
                # the workload's [settings] this server takes; the variant's own win
                gucs = {**settings[server.name], **gucs}
                sides.append(LiveSide(server, variant, gucs, session, eviction=eviction))
        sessions = {id(side.connection): side.connection for side in sides}.values()
        watch.begin(servers, [conn.info.backend_pid for conn in sessions])
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
                    "host_local": is_local(side.server.conninfo, side.server.source),
                },
            )
        if options.timing != "plan":  # plans only: nothing executed, no host to watch
            monitor = HostMonitor(
                run_id,
                max_load=options.max_load,
                max_wait_s=options.max_wait_s,
                say=None if progress is None else (lambda text: progress(text, 0)),
            )
            monitor.start()
        for query in _selected(workload, options):
            key = query_key(query)
            store.upsert_query(key, name=query.name, sql=query.sql)
            kept: list[Observation] = []
            flips = []
            for point, fixed in query.points():
                started = time.monotonic()
                first = functools.partial(watch.check, query.name, "its first execution")
                measured = measure(
                    workload,
                    query,
                    key,
                    point,
                    fixed,
                    sides,
                    options,
                    progress,
                    first,
                    None if monitor is None else monitor.tick,
                )
                store.add_observations(measured.observations)
                store.add_query_failures(measured.failures)
                found = attribute_flips(
                    query,
                    point,
                    sides,
                    measured.observations,
                    options,
                    time.monotonic() - started,
                    _teller(progress),
                )
                flips.extend(found)
                kept.extend(measured.observations)  # a flip's estimates are read over every point
            file_flips(store, key, flips, kept)
            del kept
            watch.check(query.name, "its measured executions")
            for side in {id(side.connection): side for side in sides}.values():
                try:
                    reset_session(side.connection, f"query {query.name} on {side.server.name}")
                except psycopg.Error as exc:
                    where = f"after query {query.name}"
                    raise server_failure(
                        exc, side.server.name, side.server.conninfo, where
                    ) from exc
        watch.finish(store, sides)
        if monitor is not None:
            monitor.finish(store)
        store.finish_run(run_id)
    except ServerFailure as exc:
        store.finish_run(run_id, "failed", note=exc.message)
        raise ServerFailure(
            exc.message,
            f"{exc.hint}; run {run_id} keeps what was measured before, marked failed "
            "(`planshift runs`)",
        ) from exc
    except psycopg.Error as exc:  # outside a workload statement: setup, server facts, eviction
        text = " ".join(str(exc).split())
        for server in servers:
            text = redact_secrets(text, server.conninfo)
        store.finish_run(run_id, "failed", note=f"failed: {text}")
        raise PlanshiftError(
            f"run {run_id} failed: {text}",
            f"run {run_id} keeps what was measured before, marked failed (`planshift runs`)",
        ) from exc
    except BaseException:
        if monitor is not None and not monitor.finished:
            with suppress(Exception):  # the run's own error is the one to see
                monitor.finish(store, probe=False)  # how the host was until it failed
        store.finish_run(run_id, "failed")
        raise
    finally:
        watch.close()
        for conn in {id(side.connection): side.connection for side in sides}.values():
            conn.close()
    return run_id


def _teller(progress: ProgressCallback | None) -> Callable[[str], None]:
    """Progress lines of the work between measurements (a step that moves no bar)."""
    if progress is None:
        return lambda text: None
    return lambda text: progress(text, 0)
