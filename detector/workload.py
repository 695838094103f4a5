"""Workload files (TOML): setup SQL, queries with declarative parameter generators, variants.

Every problem is reported as a PlanshiftError naming the file and the key, e.g.
``workload.toml: queries[2].params.start: 'range' needs two integers [low, high]``.
"""

from __future__ import annotations

import hashlib
import random
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from detector.errors import PlanshiftError

PARAM_KINDS = ("range", "choice", "values", "value")


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

    def query(self, name: str) -> Query:
        for query in self.queries:
            if query.name == name:
                return query
        raise PlanshiftError(f"{self.path.name}: no query named {name!r}")


class _Reader:
    def __init__(self, path: Path) -> None:
        self.file = path.name

    def fail(self, key: str, problem: str, hint: str | None = None) -> PlanshiftError:
        return PlanshiftError(f"{self.file}: {key}: {problem}", hint)

    def table(self, data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, Mapping):
            raise self.fail(f"{where}{key}", f"expected a table, got {type(value).__name__}")
        return value

    def positive_int(self, data: Mapping[str, Any], key: str, where: str, default: int) -> int:
        value = data.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise self.fail(f"{where}{key}", f"expected a non-negative integer, got {value!r}")
        return value

    def gucs(self, data: Mapping[str, Any], where: str) -> dict[str, str]:
        gucs: dict[str, str] = {}
        for name, value in data.items():
            if not isinstance(value, (str, int, float, bool)):
                raise self.fail(
                    f"{where}.{name}", f"a setting value must be a scalar, got {value!r}"
                )
            gucs[name] = ("on" if value else "off") if isinstance(value, bool) else str(value)
        return gucs

    def param(self, name: str, spec: Any, where: str) -> ParamSpec:
        key = f"{where}.{name}"
        if not isinstance(spec, Mapping):
            return ParamSpec(name, "value", (spec,))
        kinds = [k for k in spec if k in PARAM_KINDS]
        unknown = [k for k in spec if k not in PARAM_KINDS]
        if unknown or len(kinds) != 1:
            raise self.fail(
                key,
                f"unknown generator {unknown or list(spec)}",
                "use exactly one of: range = [low, high], choice = [...], values = [...], value = x",
            )
        kind = kinds[0]
        raw = spec[kind]
        if kind == "value":
            return ParamSpec(name, kind, (raw,))
        if not isinstance(raw, list) or not raw:
            raise self.fail(f"{key}.{kind}", "expected a non-empty list")
        if kind == "range" and (
            len(raw) != 2 or not all(isinstance(v, int) for v in raw) or raw[0] > raw[1]
        ):
            raise self.fail(
                f"{key}.range", "'range' needs two integers [low, high] with low <= high"
            )
        return ParamSpec(name, kind, tuple(raw))

    def query(self, raw: Any, index: int, names: set[str]) -> Query:
        where = f"queries[{index}]"
        if not isinstance(raw, Mapping):
            raise self.fail(where, "expected a table ([[queries]])")
        name, sql = raw.get("name"), raw.get("sql")
        if not isinstance(name, str) or not name:
            raise self.fail(f"{where}.name", "missing or not a string")
        if name in names:
            raise self.fail(f"{where}.name", f"duplicate query name {name!r}")
        if not isinstance(sql, str) or not sql.strip():
            raise self.fail(f"{where}.sql", "missing or empty")
        params = tuple(
            self.param(p, s, f"{where}.params")
            for p, s in self.table(raw, "params", f"{where}.").items()
        )
        sweep = None
        if "sweep" in raw:
            sweep_raw = self.table(raw, "sweep", f"{where}.")
            param, values = sweep_raw.get("param"), sweep_raw.get("values")
            if not isinstance(param, str) or not isinstance(values, list) or not values:
                raise self.fail(f"{where}.sweep", 'needs param = "name" and values = [...]')
            sweep = Sweep(param, tuple(values))
        declared = {p.name for p in params} | ({sweep.param} if sweep else set())
        for placeholder in _placeholders(sql):
            if placeholder not in declared:
                raise self.fail(
                    f"{where}.sql",
                    f"placeholder %({placeholder})s has no generator",
                    f"add [queries.params] {placeholder} = {{ range = [1, 100] }} or a sweep",
                )
        reps = raw.get("repetitions")
        if reps is not None and (not isinstance(reps, int) or reps < 1):
            raise self.fail(f"{where}.repetitions", f"expected a positive integer, got {reps!r}")
        generic = raw.get("generic_plan", False)
        if not isinstance(generic, bool):
            raise self.fail(f"{where}.generic_plan", f"expected true or false, got {generic!r}")
        if generic and (params or sweep):
            raise self.fail(
                f"{where}.generic_plan",
                "a generic plan takes no parameter values",
                "write $1, $2 ... in the SQL (as pg_stat_statements shows it) and drop params/sweep",
            )
        names.add(name)
        return Query(
            name=name,
            sql=sql.strip().rstrip(";"),
            params=params,
            sweep=sweep,
            repetitions=reps,
            generic_plan=generic,
        )

    def target(self, raw: Any, index: int) -> TargetSpec:
        where = f"targets[{index}]"
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            raise self.fail(f"{where}.name", "each [[targets]] needs a name")
        if "dsn" in raw:
            raise self.fail(
                f"{where}.dsn",
                "DSNs do not belong in workload files (they carry passwords)",
                'use dsn_env = "ENV_VAR_NAME", or --dsn NAME=DSN on the command line',
            )
        postgres, dsn_env = raw.get("postgres"), raw.get("dsn_env")
        if (postgres is None) == (dsn_env is None):
            raise self.fail(where, 'give exactly one of postgres = "15" or dsn_env = "VAR"')
        settings = self.gucs(self.table(raw, "settings", f"{where}."), f"{where}.settings")
        return TargetSpec(
            name=raw["name"],
            postgres=None if postgres is None else str(postgres),
            dsn_env=dsn_env,
            settings=settings,
        )


def _flag(reader: _Reader, head: Mapping[str, Any], key: str, default: bool) -> bool:
    value = head.get(key, default)
    if not isinstance(value, bool):
        raise reader.fail(f"workload.{key}", f"expected true or false, got {value!r}")
    return value


def _placeholders(sql: str) -> list[str]:
    import re

    return re.findall(r"%\((\w+)\)s", sql)


def load_workload(path: str | Path) -> Workload:
    path = Path(path)
    try:
        raw_bytes = path.read_bytes()
    except OSError as exc:
        raise PlanshiftError(f"cannot read workload file {path}: {exc.strerror}") from exc
    reader = _Reader(path)
    try:
        data = tomllib.loads(raw_bytes.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PlanshiftError(f"{path.name}: not valid TOML: {exc}") from exc
    known = {"workload", "setup", "queries", "variants", "targets"}
    for key in data:
        if key not in known:
            raise reader.fail(key, "unknown section", f"known sections: {', '.join(sorted(known))}")
    head = reader.table(data, "workload", "")
    setup = reader.table(data, "setup", "")
    statements = _setup_statements(reader, setup, path.parent)
    raw_queries = data.get("queries", [])
    if not isinstance(raw_queries, list) or not raw_queries:
        raise reader.fail("queries", "no [[queries]] defined", "add at least one [[queries]] table")
    names: set[str] = set()
    queries = tuple(reader.query(q, i, names) for i, q in enumerate(raw_queries))
    variants = {
        name: reader.gucs(gucs if isinstance(gucs, Mapping) else {}, f"variants.{name}")
        for name, gucs in reader.table(data, "variants", "").items()
    } or {"default": {}}
    raw_targets = data.get("targets", [])
    if not isinstance(raw_targets, list):
        raise reader.fail("targets", "expected [[targets]] tables")
    targets = tuple(reader.target(t, i) for i, t in enumerate(raw_targets))
    return Workload(
        path=path,
        name=str(head.get("name", path.stem)),
        description=str(head.get("description", "")),
        setup=statements,
        queries=queries,
        variants=variants,
        targets=targets,
        repetitions=reader.positive_int(head, "repetitions", "workload.", 20) or 1,
        warmup=reader.positive_int(head, "warmup", "workload.", 3),
        seed=reader.positive_int(head, "seed", "workload.", 42),
        prime=_flag(reader, head, "prime", True),
        content_hash=hashlib.sha256(raw_bytes).hexdigest()[:16],
    )


def _setup_statements(reader: _Reader, setup: Mapping[str, Any], base: Path) -> tuple[str, ...]:
    from pglast import split
    from pglast.parser import ParseError

    chunks: list[str] = []
    sql = setup.get("sql", "")
    if not isinstance(sql, str):
        raise reader.fail("setup.sql", "expected a string")
    chunks.append(sql)
    for i, name in enumerate(setup.get("files", [])):
        try:
            chunks.append((base / str(name)).read_text())
        except OSError as exc:
            raise reader.fail(f"setup.files[{i}]", f"cannot read {name}: {exc.strerror}") from exc
    statements: list[str] = []
    for chunk in chunks:
        try:
            statements.extend(split(chunk, with_parser=True))
        except ParseError as exc:
            raise reader.fail("setup.sql", f"SQL syntax error: {exc}") from exc
    return tuple(statements)
