"""Settings (GUCs) of the two sides: what differs, in which category, told the same way.

A side's settings are the target's recorded GUCs laid over the dominant plan's
`EXPLAIN (SETTINGS)` list (non-default planner settings). A setting absent on a side is the
server default; for the planner settings whose defaults are known (per major version where
they moved) "absent" and "set to the default" compare equal, so `random_page_cost = 4`
against an unset random_page_cost is no difference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from detector.model import Side
from detector.model.settings import (
    CATEGORIES,
    NOT_AVAILABLE,
    VERSIONED_DEFAULTS,
    category,
    default_of,
    normalized,
)
from detector.model.units import fmt_version


def side_settings(side: Side) -> dict[str, str]:
    """The dominant plan's EXPLAIN (SETTINGS) list overlaid with the target's recorded GUCs.

    The plan's list is left out when it contradicts the recorded GUCs: then the plan JSON came
    from another target (stores before plan_examples keep one EXPLAIN per shape, the first
    seen), and its settings are not this side's.
    """
    recorded = {str(k): str(v) for k, v in side.settings.items()}
    if not plan_settings_usable(side):
        return recorded
    listed = {str(k): str(v) for k, v in side.dominant.plan.settings.items()}
    return {**listed, **recorded}


def plan_settings_usable(side: Side) -> bool:
    listed = {str(k): str(v) for k, v in side.dominant.plan.settings.items()}
    recorded = {str(k): str(v) for k, v in side.settings.items()}
    return _consistent(listed, recorded, side.server_version_num)


def _consistent(
    listed: Mapping[str, str], recorded: Mapping[str, str], version: int | None
) -> bool:
    """EXPLAIN (SETTINGS) lists the non-default planner settings: every recorded one with a
    known default must be listed with its value, or be at its default."""
    for name, value in recorded.items():
        if name in listed:
            if normalized(listed[name]) != normalized(value):
                return False
            continue
        default = default_of(name, version)
        if default is not None and normalized(default) != normalized(value):
            return False
    return True


@dataclass(frozen=True)
class SettingChange:
    name: str
    before: str | None  # None: not set on that side (the server default)
    after: str | None
    category: str
    before_default: str | None = None  # the known default standing in for an unset value
    after_default: str | None = None

    def text(self) -> str:
        return f"{self.name} {_shown(self.before, self.before_default)} -> " + _shown(
            self.after, self.after_default
        )

    def as_evidence(self) -> dict[str, str | None]:
        return {
            "name": self.name,
            "baseline": self.before,
            "candidate": self.after,
            "category": self.category,
        }


def _shown(value: str | None, default: str | None) -> str:
    if value is not None:
        return value
    if default == NOT_AVAILABLE:
        return f"{NOT_AVAILABLE} (no such setting)"
    return f"{default} (default)" if default is not None else "default"


# settings_changes per (settings, dominant plan, version) of both sides and names: the sides
# of a comparison share their target's settings and their shape's plan, so a million queries
# ask a handful of times. The objects are held with the entry: their ids stay theirs.
_CHANGES: dict[tuple[Any, ...], tuple[list[SettingChange], tuple[Any, ...]]] = {}


def settings_changes(
    baseline: Side, candidate: Side, names: Iterable[str] | None = None
) -> list[SettingChange]:
    """Settings whose effective values differ, by category (CATEGORIES order), then name.

    The plans' EXPLAIN (SETTINGS) lists count only when both agree with their side's
    recorded GUCs (see side_settings); otherwise the recorded GUCs alone are compared.
    """
    wanted = None if names is None else tuple(names)
    held = (baseline.settings, baseline.plans[0].plan, candidate.settings, candidate.plans[0].plan)
    key = (
        *map(id, held),
        baseline.server_version_num,
        candidate.server_version_num,
        wanted,
    )
    found = _CHANGES.get(key)
    if found is None:
        if len(_CHANGES) >= 4096:
            _CHANGES.clear()
        found = _CHANGES[key] = (_settings_changes(baseline, candidate, wanted), held)
    return list(found[0])


def _settings_changes(
    baseline: Side, candidate: Side, names: Iterable[str] | None
) -> list[SettingChange]:
    # one side's plan list contradicting its GUCs makes both lists suspect: compare GUCs only
    if plan_settings_usable(baseline) and plan_settings_usable(candidate):
        left, right = side_settings(baseline), side_settings(candidate)
    else:
        left, right = dict(baseline.settings), dict(candidate.settings)
    # a default that moved between the sides' versions differs even where neither lists it
    moved = (
        set(VERSIONED_DEFAULTS)
        if baseline.server_version_num != candidate.server_version_num
        else set()
    )
    wanted = sorted(set(left) | set(right) | moved) if names is None else list(names)
    changes: list[SettingChange] = []
    for name in wanted:
        before, after = left.get(name), right.get(name)
        before_default = default_of(name, baseline.server_version_num)
        after_default = default_of(name, candidate.server_version_num)
        before_value = before if before is not None else before_default
        after_value = after if after is not None else after_default
        if before_value is not None and after_value is not None:
            if normalized(before_value) == normalized(after_value):
                continue
        elif before == after:
            continue
        changes.append(
            SettingChange(
                name,
                before,
                after,
                category(name),
                before_default if before is None else None,
                after_default if after is None else None,
            )
        )
    return sorted(changes, key=lambda c: (CATEGORIES.index(c.category), c.name))


def changes_text(changes: Iterable[SettingChange]) -> str:
    return ", ".join(change.text() for change in changes)


def version_change(baseline: Side, candidate: Side) -> str | None:
    """`PostgreSQL 15.18 -> 17.10` when the sides ran different server versions."""
    before, after = baseline.server_version_num, candidate.server_version_num
    if before is None or after is None or before == after:
        return None
    return f"PostgreSQL {fmt_version(before)} -> {fmt_version(after)}"
