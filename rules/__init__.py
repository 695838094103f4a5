"""The rule catalog: one module per family, one documented rule per stable code.

Importing this package registers every rule. Codes: PS1xx plan flips, PS2xx timing,
PS3xx cost/estimate divergence, PS4xx resources, PS5xx settings, PS6xx approved plans.
"""

from __future__ import annotations

from rules import approval, divergence, plan_flip, timing
from rules.base import (
    DOC_SECTIONS,
    FAMILIES,
    Rule,
    RuleConfigError,
    RuleRunner,
    all_rules,
    get_rule,
    rule,
    run_rules,
    select_rules,
)

__all__ = [
    "DOC_SECTIONS",
    "FAMILIES",
    "Rule",
    "RuleConfigError",
    "RuleRunner",
    "all_rules",
    "approval",
    "divergence",
    "get_rule",
    "plan_flip",
    "rule",
    "run_rules",
    "select_rules",
    "timing",
]
