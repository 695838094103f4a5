"""A replayed side against production, for a workload `planshift capture` wrote.

The runner files what the capture saw in each target's info (`production`: its settings,
coverage, what the check is blind to) and which of those settings the server took
(`workload_settings`). A side departs from production where it runs a planner setting with a
value production does not (a variant, a [[targets]].settings line) or could not take one of
production's (a version without the setting): the reports say so, since its plans then answer
another question than "what will production's plans be".
"""

from __future__ import annotations

from typing import Any

from detector.model.settings import carried_setting, normalized, renamed_setting
from detector.store import TargetRecord


def production_facts(target: TargetRecord) -> dict[str, Any] | None:
    """{coverage, settings, departures} of a side replaying a captured workload, else None."""
    production = target.info.get("production")
    if not isinstance(production, dict):
        return None
    settings = {str(k): str(v) for k, v in (production.get("settings") or {}).items()}
    return {
        "coverage": production.get("coverage"),
        "settings": settings,
        "departures": departures(target, settings),
    }


def departures(target: TargetRecord, production: dict[str, str]) -> dict[str, str]:
    """setting -> how this side differs from production (`1.1 (production 4)`)."""
    runs = {
        str(name): str(value)
        for name, value in (target.info.get("server_settings") or {}).items()
        if carried_setting(str(name))
    }
    runs.update(target.gucs)
    found: dict[str, str] = {}
    for name, value in sorted(runs.items()):
        wanted = production.get(name, production.get(renamed_setting(name)))
        if wanted is None:
            found[name] = f"{value} (production: default)"
        elif normalized(wanted) != normalized(value):
            found[name] = f"{value} (production {wanted})"
    applied = target.info.get("workload_settings") or {}
    for name, why in sorted((applied.get("not_applied") or {}).items()):
        found[name] = f"not set, production {production.get(name, '?')}: {why}"
    return found
