"""Workload files (TOML): setup SQL, queries with declarative parameter generators, variants.

Every problem is reported as a PlanshiftError naming the file and the key, e.g.
``workload.toml: queries[2].params.start: 'range' needs two integers [low, high]``.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from detector.errors import PlanshiftError
from detector.model.statements import statement_count
from detector.model.workload import (
    CACHE_MODES,
    MAX_POINTS,
    MAX_REPETITIONS,
    MAX_WARMUP,
    PARAM_KINDS,
    TIMING_MODES,
    ParamSpec,
    Query,
    Sweep,
    TargetSpec,
    Workload,
)

# every table of a workload file and the keys it may hold; anything else is a typo
SECTIONS = ("workload", "setup", "settings", "queries", "variants", "targets", "capture")
KEYS = {
    "workload": (
        "name",
        "description",
        "repetitions",
        "warmup",
        "seed",
        "prime",
        "timing",
        "cache",
    ),
    "setup": ("sql", "files", "on_dsn"),
    "query": (
        "name",
        "sql",
        "params",
        "sweep",
        "repetitions",
        "generic_plan",
        "cache",
        "calls",
        "mean_ms",
    ),
    "sweep": ("param", "values"),
    "target": ("name", "postgres", "dsn_env", "settings", "checksums", "setup"),
    # written by `planshift capture`: shown by the reports, never executed
    "capture": ("source", "coverage", "blind", "left_out", "not_carried"),
}
GUC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    known = f"known: {', '.join(choices)}"
    return f"did you mean {close[0]!r}? ({known})" if close else known


class _Reader:
    def __init__(self, path: Path) -> None:
        self.file = path.name

    def fail(self, key: str, problem: str, hint: str | None = None) -> PlanshiftError:
        return PlanshiftError(f"{self.file}: {key}: {problem}", hint)

    def strict(self, data: Mapping[str, Any], kind: str, where: str) -> None:
        for key in data:
            if key not in KEYS[kind]:
                raise self.fail(f"{where}{key}", "unknown key", did_you_mean(key, KEYS[kind]))

    def table(self, data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, Mapping):
            raise self.fail(f"{where}{key}", f"expected a table, got {type(value).__name__}")
        return value

    def count(
        self,
        data: Mapping[str, Any],
        key: str,
        where: str,
        default: int,
        least: int,
        most: int | None = None,
    ) -> int:
        value = data.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            kind = "a positive" if least > 0 else "a non-negative"
            raise self.fail(f"{where}{key}", f"expected {kind} integer, got {value!r}")
        if most is not None and value > most:
            raise self.fail(
                f"{where}{key}",
                f"{value} is more than {most:,} (a run that long is a typo, not a measurement)",
            )
        return value

    def text(self, data: Mapping[str, Any], key: str, where: str, default: str) -> str:
        value = data.get(key, default)
        if not isinstance(value, str):
            raise self.fail(f"{where}{key}", f"expected a string, got {value!r}")
        return value

    def gucs(self, data: Mapping[str, Any], where: str) -> dict[str, str]:
        gucs: dict[str, str] = {}
        for name, value in data.items():
            if not GUC_NAME.fullmatch(name):
                raise self.fail(f"{where}.{name}", "not a setting name")
            if not isinstance(value, (str, int, float, bool)):
                raise self.fail(
                    f"{where}.{name}", f"a setting value must be a scalar, got {value!r}"
                )
            gucs[name] = ("on" if value else "off") if isinstance(value, bool) else str(value)
        return gucs

    def single_statement(self, sql: str, key: str) -> None:
        count = statement_count(re.sub(r"%\((\w+)\)s", "0", sql))
        if count > 1:
            raise self.fail(
                key,
                f"{count} statements in one query",
                "a query is one statement; planshift runs it in a transaction it rolls back, and "
                "the protocol it uses refuses several commands in one string",
            )

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
        self.strict(raw, "query", f"{where}.")
        name, sql = raw.get("name"), raw.get("sql")
        if not isinstance(name, str) or not name.strip():
            raise self.fail(f"{where}.name", "missing or not a string")
        if name in names:
            raise self.fail(f"{where}.name", f"duplicate query name {name!r}")
        if not isinstance(sql, str) or not sql.strip():
            raise self.fail(f"{where}.sql", "missing or empty")
        self.single_statement(sql, f"{where}.sql")
        params = tuple(
            self.param(p, s, f"{where}.params")
            for p, s in self.table(raw, "params", f"{where}.").items()
        )
        sweep = None
        if "sweep" in raw:
            sweep_raw = self.table(raw, "sweep", f"{where}.")
            self.strict(sweep_raw, "sweep", f"{where}.sweep.")
            param, values = sweep_raw.get("param"), sweep_raw.get("values")
            if not isinstance(param, str) or not isinstance(values, list) or not values:
                raise self.fail(f"{where}.sweep", 'needs param = "name" and values = [...]')
            if len(values) > MAX_POINTS:
                raise self.fail(
                    f"{where}.sweep.values", f"{len(values)} points, at most {MAX_POINTS:,}"
                )
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
        if reps is not None:
            reps = self.count(raw, "repetitions", f"{where}.", 1, least=1, most=MAX_REPETITIONS)
        generic = raw.get("generic_plan", False)
        if not isinstance(generic, bool):
            raise self.fail(f"{where}.generic_plan", f"expected true or false, got {generic!r}")
        if generic and (params or sweep):
            raise self.fail(
                f"{where}.generic_plan",
                "a generic plan takes no parameter values",
                "write $1, $2 ... in the SQL (as pg_stat_statements shows it) and drop params/sweep",
            )
        cache = raw.get("cache")
        if cache is not None and cache not in CACHE_MODES:
            raise self.fail(f"{where}.cache", f'expected "warm" or "cold", got {cache!r}')
        calls = None if raw.get("calls") is None else self.count(raw, "calls", f"{where}.", 0, 0)
        mean_ms = raw.get("mean_ms")
        if mean_ms is not None and (
            isinstance(mean_ms, bool) or not isinstance(mean_ms, (int, float)) or mean_ms < 0
        ):
            raise self.fail(f"{where}.mean_ms", f"expected milliseconds >= 0, got {mean_ms!r}")
        names.add(name)
        return Query(
            name=name,
            sql=sql.strip().rstrip(";"),
            params=params,
            sweep=sweep,
            repetitions=reps,
            generic_plan=generic,
            cache=cache,
            calls=calls,
            mean_ms=None if mean_ms is None else float(mean_ms),
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
        self.strict(raw, "target", f"{where}.")
        postgres, dsn_env = raw.get("postgres"), raw.get("dsn_env")
        if dsn_env is not None and not isinstance(dsn_env, str):
            raise self.fail(f"{where}.dsn_env", "expected the name of an environment variable")
        if postgres is not None and not isinstance(postgres, (str, int)):
            raise self.fail(f"{where}.postgres", 'expected a version ("15") or a bindir')
        if (postgres is None) == (dsn_env is None):
            raise self.fail(where, 'give exactly one of postgres = "15" or dsn_env = "VAR"')
        settings = self.gucs(self.table(raw, "settings", f"{where}."), f"{where}.settings")
        checksums = raw.get("checksums")
        if checksums is not None and (not isinstance(checksums, bool) or dsn_env is not None):
            raise self.fail(
                f"{where}.checksums",
                "expected true or false, for an embedded target (postgres = ...)",
            )
        return TargetSpec(
            name=raw["name"],
            postgres=None if postgres is None else str(postgres),
            dsn_env=dsn_env,
            settings=settings,
            checksums=checksums,
            setup=_split_sql(self, self.text(raw, "setup", f"{where}.", ""), f"{where}.setup"),
        )


def _flag(reader: _Reader, head: Mapping[str, Any], key: str, default: bool) -> bool:
    value = head.get(key, default)
    if not isinstance(value, bool):
        raise reader.fail(f"workload.{key}", f"expected true or false, got {value!r}")
    return value


def _placeholders(sql: str) -> list[str]:
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
    for key in data:
        if key not in SECTIONS:
            raise reader.fail(key, "unknown section", did_you_mean(key, SECTIONS))
    head = reader.table(data, "workload", "")
    reader.strict(head, "workload", "workload.")
    setup = reader.table(data, "setup", "")
    reader.strict(setup, "setup", "setup.")
    on_dsn = reader.text(setup, "on_dsn", "setup.", "check")
    if on_dsn not in ("check", "run"):
        raise reader.fail(
            "setup.on_dsn",
            f'expected "check" or "run", got {on_dsn!r}',
            '"check" (default) only checks a --dsn server has the tables; "run" runs the setup there',
        )
    statements = _split_sql(reader, reader.text(setup, "sql", "setup.", ""), "setup.sql")
    files = _setup_files(reader, setup, path.parent)
    cache = reader.text(head, "cache", "workload.", "warm")
    if cache not in CACHE_MODES:
        raise reader.fail("workload.cache", f'expected "warm" or "cold", got {cache!r}')
    timing = reader.text(head, "timing", "workload.", "off")
    if timing not in TIMING_MODES:
        raise reader.fail(
            "workload.timing",
            f"expected one of {', '.join(TIMING_MODES)}, got {timing!r}",
            "; ".join(f'"{mode}": {text}' for mode, text in TIMING_MODES.items())
            + ' ("off" is the default)',
        )
    if timing == "plan" and cache == "cold":
        raise reader.fail(
            "workload.cache", 'a cold trial needs executions; timing "plan" executes nothing'
        )
    raw_queries = data.get("queries", [])
    if not isinstance(raw_queries, list) or not raw_queries:
        raise reader.fail("queries", "no [[queries]] defined", "add at least one [[queries]] table")
    names: set[str] = set()
    queries = tuple(reader.query(q, i, names) for i, q in enumerate(raw_queries))
    variants: dict[str, Mapping[str, str]] = {}
    declared = reader.table(data, "variants", "")
    for name in declared:
        variants[name] = reader.gucs(reader.table(declared, name, "variants."), f"variants.{name}")
    raw_targets = data.get("targets", [])
    if not isinstance(raw_targets, list):
        raise reader.fail("targets", "expected [[targets]] tables")
    targets = tuple(reader.target(t, i) for i, t in enumerate(raw_targets))
    settings = reader.gucs(reader.table(data, "settings", ""), "settings")
    return Workload(
        path=path,
        name=reader.text(head, "name", "workload.", path.stem),
        description=reader.text(head, "description", "workload.", ""),
        setup=statements,
        queries=queries,
        variants=variants or {"default": {}},
        targets=targets,
        repetitions=reader.count(head, "repetitions", "workload.", 20, 1, MAX_REPETITIONS),
        warmup=reader.count(head, "warmup", "workload.", 3, least=0, most=MAX_WARMUP),
        seed=reader.count(head, "seed", "workload.", 42, least=0),
        prime=_flag(reader, head, "prime", True),
        setup_on_dsn=on_dsn == "run",
        setup_files=files,
        settings=settings,
        capture=_capture(reader, reader.table(data, "capture", "")),
        timing=timing,
        cache=cache,
        content_hash=hashlib.sha256(raw_bytes).hexdigest()[:16],
    )


def _setup_files(reader: _Reader, setup: Mapping[str, Any], base: Path) -> tuple[Path, ...]:
    """The files, checked readable now; their SQL is read when a server is set up
    (collectors/setup_files.py), so a dump of any size costs no memory here."""
    files = setup.get("files", [])
    if not isinstance(files, list):
        raise reader.fail("setup.files", "expected a list of file names")
    paths = []
    for i, name in enumerate(files):
        path = base / str(name)
        try:
            with path.open("rb") as stream:
                stream.read(1)
        except OSError as exc:
            raise reader.fail(f"setup.files[{i}]", f"cannot read {name}: {exc.strerror}") from exc
        paths.append(path)
    return tuple(paths)


def _capture(reader: _Reader, raw: Mapping[str, Any]) -> dict[str, Any]:
    reader.strict(raw, "capture", "capture.")
    found: dict[str, Any] = {}
    for key, value in raw.items():
        is_list = isinstance(value, list) and all(isinstance(v, str) for v in value)
        if not isinstance(value, str) and not is_list:
            raise reader.fail(f"capture.{key}", "expected a string or a list of strings")
        found[key] = value
    return found


def _split_sql(reader: _Reader, sql: str, key: str) -> tuple[str, ...]:
    """Setup SQL as single statements, so VACUUM and CREATE INDEX CONCURRENTLY can run."""
    from pglast import split
    from pglast.parser import ParseError

    try:
        return tuple(split(sql, with_parser=True))
    except ParseError as exc:
        raise reader.fail(key, f"SQL syntax error: {exc}") from exc
