"""Project configuration: `planshift.toml`, or `[tool.planshift]` in pyproject.toml.

```toml
fail-on = "error"          # info | warning | error | never
min-effect = 0.10          # smallest timing change that counts
min-delta-ms = 0.01        # and the smallest change of the median, in ms
alpha = 0.05
min-samples = 5
select = ["ALL"]           # rule codes, prefixes (PS1), names or families
ignore = ["PS201"]
approved = "planshift.lock"
busy-host = "warn"         # verdicts a busy host put at risk: warn | inconclusive | fail

[rules.PS101]              # options of one rule, by code or name
near_tie = 0.03

[[suppress]]               # per-query suppressions, each with a reason
query = "order_range"
rules = ["PS100"]
reason = "a 100-row sort: either plan is fine"
```
Command-line options override the file.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from detector.errors import PlanshiftError

KNOWN_KEYS = {
    "fail-on",
    "min-effect",
    "min-delta-ms",
    "alpha",
    "min-samples",
    "select",
    "ignore",
    "approved",
    "rules",
    "suppress",
    "store",
    "busy-host",
}
BUSY_HOST_MODES = ("warn", "inconclusive", "fail")


@dataclass(frozen=True)
class Suppression:
    query: str
    rules: tuple[str, ...]  # empty = every rule
    reason: str

    def matches(self, query_name: str, code: str, name: str) -> bool:
        return self.query == query_name and (
            not self.rules or code in self.rules or name in self.rules
        )


@dataclass(frozen=True)
class Config:
    source: Path | None = None
    fail_on: str = "error"
    min_effect: float = 0.10
    min_delta_ms: float = 0.01
    alpha: float = 0.05
    min_samples: int = 5
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    approved: Path | None = None
    store: Path | None = None
    rule_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    suppressions: tuple[Suppression, ...] = ()
    busy_host: str = "warn"


def find_config(start: Path) -> tuple[Path, Mapping[str, Any]] | None:
    """`planshift.toml` or a pyproject.toml with [tool.planshift], in start or its parents."""
    for directory in (start, *start.parents):
        candidate = directory / "planshift.toml"
        if candidate.is_file():
            return candidate, _read(candidate)
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file():
            section = _read(pyproject).get("tool", {}).get("planshift")
            if isinstance(section, Mapping):
                return pyproject, section
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PlanshiftError(f"cannot read configuration {path}: {exc}") from exc


def load_config(explicit: Path | None = None, start: Path | None = None) -> Config:
    if explicit is not None:
        if not explicit.is_file():
            raise PlanshiftError(f"configuration file {explicit} not found")
        data: Mapping[str, Any] = _read(explicit)
        if explicit.name == "pyproject.toml":
            data = data.get("tool", {}).get("planshift", {})
        found: tuple[Path, Mapping[str, Any]] | None = (explicit, data)
    else:
        found = find_config(start or Path.cwd())
    if found is None:
        return Config()
    return parse_config(*found)


def parse_config(path: Path, data: Mapping[str, Any]) -> Config:
    where = path.name if path.name == "planshift.toml" else f"{path.name} [tool.planshift]"

    def fail(key: str, problem: str, hint: str | None = None) -> PlanshiftError:
        return PlanshiftError(f"{where}: {key}: {problem}", hint)

    for key in data:
        if key not in KNOWN_KEYS:
            raise fail(key, "unknown setting", f"known settings: {', '.join(sorted(KNOWN_KEYS))}")

    def number(key: str, default: float) -> float:
        value = data.get(key, default)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise fail(key, f"expected a non-negative number, got {value!r}")
        return float(value)

    def codes(key: str) -> tuple[str, ...] | None:
        value = data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(key, "expected a list of rule codes or names")
        return tuple(value)

    rules = data.get("rules", {})
    if not isinstance(rules, Mapping) or not all(isinstance(v, Mapping) for v in rules.values()):
        raise fail("rules", "expected tables like [rules.PS101]")
    fail_on = data.get("fail-on", "error")
    if fail_on not in ("info", "warning", "error", "never"):
        raise fail("fail-on", f"unknown value {fail_on!r}", "use info, warning, error or never")
    busy_host = data.get("busy-host", "warn")
    if busy_host not in BUSY_HOST_MODES:
        raise fail("busy-host", f"unknown value {busy_host!r}", "use warn, inconclusive or fail")
    base = path.parent
    approved = data.get("approved")
    store = data.get("store")
    _check_rules(fail, codes("select"), codes("ignore") or (), rules)
    return Config(
        source=path,
        fail_on=fail_on,
        min_effect=number("min-effect", 0.10),
        min_delta_ms=number("min-delta-ms", 0.01),
        alpha=number("alpha", 0.05),
        min_samples=int(number("min-samples", 5)),
        select=codes("select"),
        ignore=codes("ignore") or (),
        approved=base / str(approved) if approved else None,
        store=base / str(store) if store else None,
        rule_options={str(k): dict(v) for k, v in rules.items()},
        suppressions=tuple(
            _suppression(fail, i, raw) for i, raw in enumerate(data.get("suppress", []))
        ),
        busy_host=busy_host,
    )


def _check_rules(
    fail: Any,
    select: tuple[str, ...] | None,
    ignore: tuple[str, ...],
    options: Mapping[str, Mapping[str, Any]],
) -> None:
    """Unknown rules, selectors and options are errors here, naming the key, with a hint."""
    from rules import RuleConfigError, get_rule, select_rules

    checks: list[tuple[str, Any]] = [
        ("select", lambda: select_rules(select)),
        ("ignore", lambda: select_rules((), ignore)),
    ]
    checks += [
        (f"rules.{code}", lambda code=code, values=values: get_rule(code).resolve_options(values))
        for code, values in options.items()
    ]
    for key, check in checks:
        try:
            check()
        except RuleConfigError as exc:
            raise fail(key, exc.message, exc.hint) from exc


def _suppression(fail: Any, index: int, raw: Any) -> Suppression:
    key = f"suppress[{index}]"
    if not isinstance(raw, Mapping):
        raise fail(key, "expected a table ([[suppress]])")
    query, reason, rules = raw.get("query"), raw.get("reason"), raw.get("rules", [])
    if not isinstance(query, str) or not query:
        raise fail(f"{key}.query", "missing: the query name the suppression applies to")
    if not isinstance(reason, str) or not reason.strip():
        raise fail(
            f"{key}.reason", "every suppression needs a reason", "say why this is acceptable"
        )
    if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
        raise fail(f"{key}.rules", "expected a list of rule codes or names")
    return Suppression(query=query, rules=tuple(rules), reason=reason.strip())
