"""What a run measures on: one server x variant (a side, what the store calls a target), the
order the sides run in for each sample, and the run's options."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from collectors.cache import Eviction
from collectors.servers.targets import Server
from detector.errors import PlanshiftError
from detector.model import Plan


@dataclass
class LiveSide:
    """One server x variant, connected, while a run measures on it: what the store calls a
    target and a comparison a side (`detector.model.Side`)."""

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
    timing: str = "off"  # set from the workload's: with "plan", no statement is executed
    prime: bool = True  # set from the workload's: each sample's pages are read once unmeasured
    # the rejected plan timed on the candidate (collectors/counterfactual.py): the seconds its
    # counterfactuals may spend per query point, given (0: none) or as a share of the time the
    # point's measurement took (None and None: unbounded); and whether both directions of each
    # pair of sides are timed (else only baseline -> candidate in the run's order of sides)
    counterfactual_share: float | None = 0.25
    counterfactual_seconds: float | None = None
    counterfactual_both: bool = False
    max_load: float | None = None  # pause measuring while the 1-minute load is above it ...
    max_wait_s: float = 300.0  # ... for at most this long in all (collectors/host.py)


def side_name(server: str, variant: str, servers: int, variants: int) -> str:
    """`pg15/fast` in general; just the variant (or server) when the other has one value."""
    if servers == 1 and variants > 1:
        return variant
    if variants == 1:
        return server
    return f"{server}/{variant}"


def rotated(sides: Sequence[LiveSide], index: int) -> list[LiveSide]:
    """The order of sample i: servers rotate, and within each server its variants rotate.

    The first execution of a sample on a server reads pages cold for those parameters and warms
    them for the server's next variants; rotating within each server makes every variant go
    first on its server equally often (rotating the flat list would not: with two servers the
    first variant of each would always follow the other server's execution, i.e. run cold).
    """
    servers = list(dict.fromkeys(side.server.name for side in sides))
    shift = index % len(servers)
    order: list[LiveSide] = []
    for name in servers[shift:] + servers[:shift]:
        group = [side for side in sides if side.server.name == name]
        first = index % len(group)
        order.extend(group[first:] + group[:first])
    return order
