"""Settings (GUCs) of the two sides: what differs, in which category, told the same way.

A side's settings are the target's recorded GUCs laid over the dominant plan's
`EXPLAIN (SETTINGS)` list (non-default planner settings). A setting absent on a side is the
server default; for the planner settings whose defaults are known (per major version where
they moved) "absent" and "set to the default" compare equal, so `random_page_cost = 4`
against an unset random_page_cost is no difference.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from detector.model import Side

#: Settings that scale the cost of every plan: with different values on the two sides the
#: costs are in different units and do not compare.
COST_UNIT_SETTINGS = (
    "random_page_cost",
    "seq_page_cost",
    "cpu_tuple_cost",
    "cpu_index_tuple_cost",
    "cpu_operator_cost",
    "effective_cache_size",
)
#: Settings that move the clock without moving any cost (seed 001: prefetching).
IO_SETTINGS = (
    "effective_io_concurrency",
    "maintenance_io_concurrency",
    "io_method",
    "io_combine_limit",
    "io_workers",
    "io_max_concurrency",
    "debug_io_direct",
    "shared_buffers",
    "huge_pages",
    "track_io_timing",
)
MEMORY_SETTINGS = ("work_mem", "hash_mem_multiplier", "temp_buffers", "maintenance_work_mem")
PARALLEL_SETTINGS = (
    "max_parallel_workers_per_gather",
    "max_parallel_workers",
    "max_worker_processes",
    "parallel_setup_cost",
    "parallel_tuple_cost",
    "min_parallel_table_scan_size",
    "min_parallel_index_scan_size",
    "parallel_leader_participation",
    "debug_parallel_query",
    "force_parallel_mode",
)
JOIN_SEARCH_SETTINGS = ("join_collapse_limit", "from_collapse_limit")
CATEGORIES = (
    "cost units",
    "plan methods",
    "memory",
    "parallelism",
    "jit",
    "join search",
    "i/o",
    "other",
)

_DEFAULTS: Mapping[str, str] = {
    "random_page_cost": "4",
    "seq_page_cost": "1",
    "cpu_tuple_cost": "0.01",
    "cpu_index_tuple_cost": "0.005",
    "cpu_operator_cost": "0.0025",
    "effective_cache_size": "4GB",
    "work_mem": "4MB",
    "hash_mem_multiplier": "2",
    "max_parallel_workers_per_gather": "2",
    "max_parallel_workers": "8",
    "parallel_setup_cost": "1000",
    "parallel_tuple_cost": "0.1",
    "min_parallel_table_scan_size": "8MB",
    "min_parallel_index_scan_size": "512kB",
    "jit": "on",
    "jit_above_cost": "100000",
    "jit_inline_above_cost": "500000",
    "jit_optimize_above_cost": "500000",
    "join_collapse_limit": "8",
    "from_collapse_limit": "8",
    "geqo_threshold": "12",
    "default_statistics_target": "100",
}
#: defaults that changed in a major version: name -> ((first major, value), ...), oldest first
_VERSIONED_DEFAULTS: Mapping[str, tuple[tuple[int, str], ...]] = {
    "effective_io_concurrency": ((0, "1"), (18, "16")),
    "maintenance_io_concurrency": ((0, "10"), (18, "16")),
}
_OFF_BY_DEFAULT = ("enable_partitionwise_join", "enable_partitionwise_aggregate")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)\s*(B|kB|MB|GB|TB)$")
_UNITS = {"B": 1 / 1024, "kB": 1, "MB": 1024, "GB": 1024**2, "TB": 1024**3}


def category(name: str) -> str:
    if name in COST_UNIT_SETTINGS:
        return "cost units"
    if name.startswith("enable_"):
        return "plan methods"
    if name in MEMORY_SETTINGS:
        return "memory"
    if name in PARALLEL_SETTINGS:
        return "parallelism"
    if name.startswith("jit"):
        return "jit"
    if name in JOIN_SEARCH_SETTINGS or name.startswith("geqo"):
        return "join search"
    if name in IO_SETTINGS:
        return "i/o"
    return "other"


#: settings a version does not have before this major: shown as "n/a" there, not "default"
_INTRODUCED: Mapping[str, int] = {
    "io_method": 18,
    "io_workers": 18,
    "io_max_concurrency": 18,
    "io_combine_limit": 17,
    "debug_io_direct": 16,
}
NOT_AVAILABLE = "n/a"


def default_of(name: str, version_num: int | None) -> str | None:
    """The server default of a planner setting, when planshift knows it; "n/a" for a setting
    the version does not have."""
    if version_num and name in _INTRODUCED and version_num // 10000 < _INTRODUCED[name]:
        return NOT_AVAILABLE
    if name in _VERSIONED_DEFAULTS:
        major = (version_num or 0) // 10000
        value = _VERSIONED_DEFAULTS[name][0][1]
        for since, moved in _VERSIONED_DEFAULTS[name]:
            if major >= since:
                value = moved
        return value
    if name.startswith("enable_"):
        return "off" if name in _OFF_BY_DEFAULT else "on"
    return _DEFAULTS.get(name)


@functools.lru_cache(maxsize=4096)  # a comparison asks about the same few values per query
def normalized(value: str) -> str:
    """`64MB` and `65536kB` are one value, so are `4` and `4.0`, `ON` and `on`."""
    text = value.strip()
    memory = _MEMORY.match(text)
    if memory:
        return f"{float(memory.group(1)) * _UNITS[memory.group(2)]:g}kB"
    try:
        return f"{float(text):g}"
    except ValueError:
        return text.lower()


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


def settings_changes(
    baseline: Side, candidate: Side, names: Iterable[str] | None = None
) -> list[SettingChange]:
    """Settings whose effective values differ, by category (CATEGORIES order), then name.

    The plans' EXPLAIN (SETTINGS) lists count only when both agree with their side's
    recorded GUCs (see side_settings); otherwise the recorded GUCs alone are compared.
    """
    # one side's plan list contradicting its GUCs makes both lists suspect: compare GUCs only
    if plan_settings_usable(baseline) and plan_settings_usable(candidate):
        left, right = side_settings(baseline), side_settings(candidate)
    else:
        left, right = dict(baseline.settings), dict(candidate.settings)
    # a default that moved between the sides' versions differs even where neither lists it
    moved = (
        set(_VERSIONED_DEFAULTS)
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


def version_text(version_num: int | None) -> str:
    """`150018` -> `15.18`, `90624` -> `9.6.24`."""
    if version_num is None:
        return "?"
    if version_num >= 100000:
        return f"{version_num // 10000}.{version_num % 10000}"
    return f"{version_num // 10000}.{version_num // 100 % 100}.{version_num % 100}"


def version_change(baseline: Side, candidate: Side) -> str | None:
    """`PostgreSQL 15.18 -> 17.10` when the sides ran different server versions."""
    before, after = baseline.server_version_num, candidate.server_version_num
    if before is None or after is None or before == after:
        return None
    return f"PostgreSQL {version_text(before)} -> {version_text(after)}"
