"""The rule catalog: one documented rule per stable code, one module per rule.

Where is PS101? In `rules/ps101_index_to_bitmap_scan.py`: one rule per file, named by its
code and name (`ps<code>_<name>.py`; `planshift rules PS101` prints the file). Importing
this package imports every module whose file name has that pattern, and importing a module
registers its rule (the `rule` decorator): a new rule file cannot be forgotten, and there is
no list to add it to. What a family of rules shares lives in a module named for what it
does (`spills`, `row_estimates`, `timing_messages`).

Codes: PS1xx plan flips, PS2xx timing, PS3xx cost/estimate divergence and row estimates,
PS4xx resources, PS5xx settings, PS6xx approved plans, PS7xx failed executions.

The framework: `base` (the registry, selectors), `runner` (the rules over many queries, as
their gates allow), `common` (severity, number formats, evidence), `matching` (facts of one
plan), `pairing` (one side's nodes paired with the other's), `gucs` (the settings that differ
between the sides), `causes` (why a plan flipped, in words).
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
from rules.rule_runner import RuleRunner, run_rules

#: `ps101_index_to_bitmap_scan`: the module of rule PS101 index-to-bitmap-scan
RULE_MODULE = re.compile(r"^ps(?P<code>\d{3})_(?!ps\d)(?P<name>[a-z0-9]+(?:_[a-z0-9]+)*)$")


def rule_modules() -> list[str]:
    """The rule modules of this package (by file name), sorted."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if RULE_MODULE.match(m.name))


for _name in rule_modules():
    importlib.import_module(f"{__name__}.{_name}")

__all__ = [
    "DOC_SECTIONS",
    "FAMILIES",
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
