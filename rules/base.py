"""The rule framework: one documented rule per stable code, registered by a decorator.

A rule is a pure function of a `QueryComparison` (plan pairs plus timing statistics) and
its options; it yields `Finding`s. Codes group by family: PS1xx plan flips, PS2xx timing,
PS3xx cost/estimate divergence, PS4xx resources, PS5xx settings, PS6xx approved plans, PS7xx
failed executions.

Errors a user can cause (an unknown rule or option, a badly typed option) raise
`RuleConfigError`, a `PlanshiftError` (the one user-error type: the CLI prints `error:`/`hint:`
and exits 2) and a `LookupError`, with a did-you-mean hint.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from detector.errors import PlanshiftError
from detector.model import Finding, QueryComparison, Severity
from detector.model.bulk import builder

OptionValue = float | int | str | bool
CheckFn = Callable[[QueryComparison, Mapping[str, Any]], Iterable[Finding]]
Gate = Callable[[QueryComparison, Mapping[str, Any]], bool]
# per comparison of a list, False: silent for it (see `rule`)
EachGate = Callable[[Sequence[QueryComparison], Mapping[str, Any]], Sequence[bool]]

#: family -> code prefix; a rule's code must start with its family's prefix.
FAMILIES: Mapping[str, str] = {
    "plan-flip": "PS1",
    "timing": "PS2",
    "divergence": "PS3",
    "estimates": "PS3",
    "resources": "PS4",
    "settings": "PS5",
    "baselines": "PS6",
    "failures": "PS7",
}
#: the `## Heading` sections every rule's docstring has, in this order
DOC_SECTIONS = ("What it flags", "Why it matters", "Example", "What to do", "References")

_CODE = re.compile(r"^PS\d{3}$")
_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_REGISTRY: dict[str, Rule] = {}


class RuleConfigError(PlanshiftError, LookupError):
    """An unknown rule code/name/selector or option, or an option of the wrong type."""

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message} ({self.hint})"


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    family: str
    severity: Severity
    options: Mapping[str, OptionValue]
    check: CheckFn
    needs_plan_change: bool = False  # silent when the dominant plan is the same: not even called
    gate: Gate | None = None  # False: silent, see `rule`
    each: EachGate | None = None  # False at i: silent for comparison i, see `rule`
    without_plans: bool = False  # also sees queries without a plan on a side, see `rule`

    @property
    def doc(self) -> str:
        """The check function's docstring, dedented: summary line, then the DOC_SECTIONS."""
        return inspect.cleandoc(self.check.__doc__ or "")

    @property
    def summary(self) -> str:
        return self.doc.splitlines()[0] if self.doc else ""

    @property
    def file(self) -> str:
        """The file the rule lives in, `rules/ps101_index_to_bitmap_scan.py` (relative to the
        folder that holds the rules package; absolute for a rule defined elsewhere)."""
        path = Path(inspect.getfile(self.check)).resolve()
        return str(path.relative_to(_HOME)) if path.is_relative_to(_HOME) else str(path)

    def sections(self) -> dict[str, str]:
        """`## Heading` blocks of the doc, by heading (text dedented, stripped)."""
        found: dict[str, str] = {}
        heading: str | None = None
        lines: list[str] = []
        for line in [*self.doc.splitlines(), "## "]:
            if line.startswith("## "):
                if heading is not None:
                    found[heading] = "\n".join(lines).strip()
                heading, lines = line[3:].strip(), []
            elif heading is not None:
                lines.append(line)
        return found

    def resolve_options(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Defaults merged with overrides; unknown names and wrong types raise RuleConfigError."""
        merged: dict[str, Any] = dict(self.options)
        for key, value in (overrides or {}).items():
            if key not in self.options:
                raise RuleConfigError(
                    f"{self.code} ({self.name}) has no option {key!r}",
                    _choices(key, list(self.options), "options"),
                )
            merged[key] = _coerce(self, key, self.options[key], value)
        return merged

    def finding(
        self,
        comparison: QueryComparison,
        message: str,
        evidence: Mapping[str, Any],
        severity: Severity | None = None,
    ) -> Finding:
        """A finding of this rule for `comparison` (default severity unless one is given)."""
        return _new_finding(
            self.code,
            self.name,
            self.severity if severity is None else severity,
            comparison.query_key,
            comparison.query_name,
            message,
            dict(evidence),
            None,  # point: the comparison's, filled in by whoever ran the rules
        )


_new_finding = builder(Finding)
_HOME = Path(__file__).resolve().parent.parent  # the folder that holds the rules package


def _coerce(rule: Rule, key: str, default: OptionValue, value: Any) -> OptionValue:
    want = type(default)
    if isinstance(value, bool) == (want is bool):
        if want is float and isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, want):
            return value
    raise RuleConfigError(
        f"{rule.code} option {key!r} must be {want.__name__}, got {value!r}",
        f"default is {default!r}",
    )


def _choices(word: str, candidates: list[str], what: str) -> str:
    close = difflib.get_close_matches(word, candidates, n=3, cutoff=0.5)
    if not close and word.upper() != word:
        close = difflib.get_close_matches(word.upper(), candidates, n=3, cutoff=0.5)
    if close:
        return "did you mean " + " or ".join(close) + "?"
    if what == "rules":
        return "`planshift rules` lists the rule codes and names; families: " + ", ".join(
            sorted(FAMILIES)
        )
    return f"known {what}: " + (", ".join(sorted(candidates)) or "none")


def rule(
    code: str,
    name: str,
    family: str,
    severity: Severity,
    *,
    needs_plan_change: bool = False,
    gate: Gate | None = None,
    each: EachGate | None = None,
    without_plans: bool = False,
    **options: OptionValue,
) -> Callable[[CheckFn], Rule]:
    """Register the decorated check function as rule `code`; options are the defaults.

    The decorated name is the `Rule`: its check yields `that_name.finding(...)`, so the code
    is written once, here (and in the file name, `ps<code>_<name>.py`).

    `needs_plan_change=True` declares that the rule never fires when the dominant plan shape
    is the same on both sides, so a comparison of many unchanged queries skips it. A `gate`
    that returns False declares the rule silent for every comparison with the same dominant
    plan objects, plan change, timing verdict, approval state (None or not), settings
    objects and server versions of the sides: it may read nothing else, and
    `RuleRunner.many` asks it once per such kind of comparison. `each` is asked once for a
    whole list of comparisons and answers per comparison (False: silent for that one): a
    test of the query's own numbers, cheaper in bulk than calling the check a million times.
    A query that failed on every execution on a side has no plan there (`side.plans` empty):
    only rules registered with `without_plans=True` see such comparisons.
    """
    if not _CODE.match(code):
        raise ValueError(f"rule code {code!r} is not PS + three digits")
    if not _NAME.match(name):
        raise ValueError(f"rule name {name!r} is not kebab-case")
    if family not in FAMILIES or not code.startswith(FAMILIES[family]):
        raise ValueError(f"rule {code}: family {family!r} does not match the code's range")

    def register(check: CheckFn) -> Rule:
        for other in _REGISTRY.values():
            if other.code == code or other.name == name:
                raise ValueError(f"rule {code} {name} clashes with {other.code} {other.name}")
        registered = _REGISTRY[code] = Rule(
            code,
            name,
            family,
            severity,
            dict(options),
            check,
            needs_plan_change,
            gate,
            each,
            without_plans,
        )
        return registered

    return register


def all_rules() -> list[Rule]:
    """Every registered rule, sorted by code."""
    return sorted(_REGISTRY.values(), key=lambda r: r.code)


def get_rule(code_or_name: str) -> Rule:
    """A rule by code (`PS101`, case-insensitive) or name (`index-to-bitmap-scan`)."""
    key = code_or_name.strip()
    for candidate in _REGISTRY.values():
        if key.upper() == candidate.code or key.lower() == candidate.name:
            return candidate
    known = [r.code for r in _REGISTRY.values()] + [r.name for r in _REGISTRY.values()]
    raise RuleConfigError(f"unknown rule {code_or_name!r}", _choices(key, known, "rules"))


def select_rules(select: Iterable[str] | None = None, ignore: Iterable[str] = ()) -> list[Rule]:
    """Rules chosen by selectors, ruff-style; `ignore` wins over `select`.

    A selector is `ALL`, a code (`PS101`), a code prefix (`PS1`, `PS10`), a rule name
    (`index-to-bitmap-scan`) or a family (`plan-flip`). `select=None` means all rules.
    """
    chosen = _matching(["ALL"] if select is None else select)
    dropped = _matching(ignore)
    return [r for r in all_rules() if r.code in chosen and r.code not in dropped]


def _matching(selectors: Iterable[str]) -> set[str]:
    codes: set[str] = set()
    for raw in selectors:
        selector = raw.strip()
        upper = selector.upper()
        hits = {
            r.code
            for r in _REGISTRY.values()
            if upper == "ALL"
            or (upper.startswith("PS") and r.code.startswith(upper))
            or selector.lower() in (r.name, r.family)
        }
        if not hits:
            known = [r.code for r in _REGISTRY.values()] + [r.name for r in _REGISTRY.values()]
            known += sorted({r.family for r in _REGISTRY.values()})
            raise RuleConfigError(
                f"selector {raw!r} matches no rule", _choices(selector, known, "rules")
            )
        codes |= hits
    return codes
