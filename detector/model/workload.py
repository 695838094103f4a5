"""The workload model: queries with declarative parameter generators, sweeps, variants, targets.

Pure data; `detector.jobs.workload.load_workload` reads it from a TOML file.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from detector.errors import PlanshiftError

PARAM_KINDS = ("range", "choice", "values", "value")
# how a measured execution is timed, and how reports name it
TIMING_MODES: Mapping[str, str] = {
    "off": "EXPLAIN ANALYZE, TIMING OFF",
    "on": "EXPLAIN ANALYZE with per-node timing",
    "plain": "the bare statement, client-timed",
    "plan": "plain EXPLAIN, not executed (plans only, no timings)",
}
CACHE_MODES = ("warm", "cold")
# what one run may ask for: more is a typo (1e9 repetitions run for days), not a measurement;
# a 5% effect is decided by tens of paired samples (README, How it decides)
MAX_REPETITIONS = 10_000
MAX_WARMUP = 1_000
MAX_POINTS = 1_000  # sweep values of a query


def check_count(what: str, value: int, least: int, most: int) -> str | None:
    """Why `value` is not a count planshift accepts for `what` (None when it is)."""
    if value < least:
        return f"{what} {value}: expected {'a positive number' if least > 0 else '0 or more'}"
    if value > most:
        return f"{what} {value}: at most {most:,} (a run that long is a typo, not a measurement)"
    return None


@dataclass(frozen=True)
class ParamSpec:
    """One parameter generator: `range = [lo, hi]` (uniform integers), `choice = [...]` (uniform
    pick), `values = [...]` (cycled in order), or a fixed `value`."""

    name: str
    kind: str
    args: tuple[Any, ...]

    def draw(self, rng: random.Random, index: int) -> Any:
        if self.kind == "range":
            return rng.randint(self.args[0], self.args[1])
        if self.kind == "choice":
            return rng.choice(self.args)
        if self.kind == "values":
            return self.args[index % len(self.args)]
        return self.args[0]


@dataclass(frozen=True)
class Sweep:
    """A parameter varied over points; each point is measured like a query of its own."""

    param: str
    values: tuple[Any, ...]

    def label(self, value: Any) -> str:
        return f"{self.param}={value}"


@dataclass(frozen=True)
class Query:
    name: str
    sql: str
    params: tuple[ParamSpec, ...] = ()
    sweep: Sweep | None = None
    repetitions: int | None = None
    generic_plan: bool = False  # plan-only: EXPLAIN (GENERIC_PLAN) of SQL with $n, no timings
    cache: str | None = None  # "warm" | "cold" for this query (default: the workload's)
    # production weight (`planshift capture`, from pg_stat_statements): executions and mean
    # milliseconds; the impact ranking counts `calls` executions of the query
    calls: int | None = None
    mean_ms: float | None = None

    @property
    def placeholders(self) -> bool:
        """Whether the SQL has `%(name)s` placeholders (else it is sent exactly as written)."""
        return bool(self.params or self.sweep)

    def points(self) -> list[tuple[str | None, dict[str, Any]]]:
        """(label, fixed parameter values) per sweep point; one unlabelled point without a sweep."""
        if self.sweep is None:
            return [(None, {})]
        return [(self.sweep.label(v), {self.sweep.param: v}) for v in self.sweep.values]

    def parameters(
        self, rng: random.Random, index: int, fixed: Mapping[str, Any]
    ) -> dict[str, Any]:
        values = {spec.name: spec.draw(rng, index) for spec in self.params}
        values.update(fixed)
        return values


@dataclass(frozen=True)
class TargetSpec:
    """A server: an embedded cluster of an installed version, or an existing server's DSN."""

    name: str
    postgres: str | None = None  # version or bindir for an embedded cluster
    dsn_env: str | None = None  # environment variable holding the DSN (keeps secrets out of files)
    settings: Mapping[str, str] = field(default_factory=dict)  # postgresql.conf for embedded
    checksums: bool | None = None  # initdb --data-checksums for embedded (default: off)
    # SQL run on this server after the workload's [setup]: a table state of its own (vacuumed
    # or not, before or after a bulk load) measured interleaved against the other targets
    setup: tuple[str, ...] = ()


@dataclass(frozen=True)
class Workload:
    path: Path
    name: str
    description: str
    setup: tuple[str, ...]
    queries: tuple[Query, ...]
    variants: Mapping[str, Mapping[str, str]]
    targets: tuple[TargetSpec, ...]
    repetitions: int
    warmup: int
    seed: int
    content_hash: str
    prime: bool = True  # run each sample's parameters once, unmeasured, on every side first
    setup_on_dsn: bool = False  # [setup] on_dsn = "run": setup runs on --dsn servers too
    # [setup] files: read statement by statement when a server is set up (a dump of any size
    # is never held in memory), after the [setup] sql statements
    setup_files: tuple[Path, ...] = ()
    # [settings]: GUCs every side runs with (set_config in each statement's transaction, and
    # in the setup session); a variant's value of the same setting wins
    settings: Mapping[str, str] = field(default_factory=dict)
    # [capture]: what `planshift capture` saw (source, coverage, what the check is blind to);
    # when present, [settings] are production's and the reports say where a side departs
    capture: Mapping[str, Any] = field(default_factory=dict)
    # how a measured execution is timed: EXPLAIN ANALYZE with per-node TIMING "off" (default)
    # or "on", or "plain": the bare statement's round trip (its plan from an extra EXPLAIN), or
    # "plan": plain EXPLAIN, nothing executed (`run --plan-only`)
    timing: str = "off"
    # "warm": executions find what earlier ones cached; "cold": before each measured execution the
    # relations it reads are evicted from shared buffers and the OS page cache (collectors/cache.py)
    cache: str = "warm"

    def cache_of(self, query: Query) -> str:
        return query.cache or self.cache

    def query(self, name: str) -> Query:
        for query in self.queries:
            if query.name == name:
                return query
        raise PlanshiftError(f"{self.path.name}: no query named {name!r}")
