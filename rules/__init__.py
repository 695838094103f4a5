"""The rule catalog: one module per family, one documented rule per stable code.

Importing this package registers every rule. Codes: PS1xx plan flips, PS2xx timing,
PS3xx cost/estimate divergence and row estimates, PS4xx resources, PS5xx settings, PS6xx
approved plans.
"""

from __future__ import annotations

from rules import (
    approval,
    divergence,
    estimates,
    joins,
    operators,
    plan_flip,
    planning,
    resources,
    scans,
    settings,
    timing,
)
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
    "estimates",
    "get_rule",
    "joins",
    "operators",
    "plan_flip",
    "planning",
    "resources",
    "rule",
    "run_rules",
    "scans",
    "select_rules",
    "settings",
    "timing",
]
