"""The rule catalog: one documented rule per stable code, one module per rule.

Where is PS101? In `rules/ps101_index_to_bitmap_scan.py`: a rule module is named by its
code and name (`ps<code>_<name>.py`), or, for a small family sharing most of its code, by
its first and last codes (`ps401_ps403_spills.py`: PS401, PS402, PS403). Importing this
package imports every module whose file name has that pattern, and importing a module
registers its rules (the `rule` decorator): a new rule file cannot be forgotten.

Codes: PS1xx plan flips, PS2xx timing, PS3xx cost/estimate divergence and row estimates,
PS4xx resources, PS5xx settings, PS6xx approved plans, PS7xx failed executions.

The framework: `base` (the registry, selectors), `runner` (the rules over many queries, as
their gates allow), `common` (severity, number formats, evidence), `matching` (facts of one
plan), `pairing` (one side's nodes paired with the other's), `gucs` (the settings that differ
between the sides).
"""

from __future__ import annotations

import importlib
import pkgutil
import re

from rules.base import (
    DOC_SECTIONS,
    FAMILIES,
    Rule,
    RuleConfigError,
    all_rules,
    get_rule,
    rule,
    select_rules,
)
from rules.runner import RuleRunner, run_rules

#: `ps101_index_to_bitmap_scan` (one rule) or `ps401_ps403_spills` (a family, codes inclusive)
RULE_MODULE = re.compile(r"^ps(?P<first>\d{3})(?:_ps(?P<last>\d{3}))?_[a-z0-9]+(?:_[a-z0-9]+)*$")
#: the modules of the package that hold no rule
FRAMEWORK_MODULES = frozenset({"base", "causes", "common", "gucs", "matching", "pairing", "runner"})


def rule_modules() -> list[str]:
    """The rule modules of this package (by file name), sorted."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if RULE_MODULE.match(m.name))


for _name in rule_modules():
    importlib.import_module(f"{__name__}.{_name}")

__all__ = [
    "DOC_SECTIONS",
    "FAMILIES",
    "FRAMEWORK_MODULES",
    "RULE_MODULE",
    "Rule",
    "RuleConfigError",
    "RuleRunner",
    "all_rules",
    "get_rule",
    "rule",
    "rule_modules",
    "run_rules",
    "select_rules",
]
