"""THE settings taxonomy: which GUCs move costs, the clock, memory, parallelism; their defaults.

Rules, reports, the timeline and the attribution trials all read settings through this module,
so "settings that make costs incomparable" means one list everywhere.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from detector.model.plan import Plan

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
#: Settings that move the clock without moving any cost (prefetching, the I/O method, the buffer pool).
IO_SETTINGS = (
    "effective_io_concurrency",
    "maintenance_io_concurrency",
    "io_method",
    "io_combine_limit",
    "io_workers",
    "io_max_concurrency",
    "debug_io_direct",
    "data_checksums",
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
VERSIONED_DEFAULTS: Mapping[str, tuple[tuple[int, str], ...]] = {
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
    if name in VERSIONED_DEFAULTS:
        major = (version_num or 0) // 10000
        value = VERSIONED_DEFAULTS[name][0][1]
        for since, moved in VERSIONED_DEFAULTS[name]:
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


#: Settings that move plan costs (or, like prefetching, the clock without the cost).
COST_SETTINGS = (
    *COST_UNIT_SETTINGS,
    "effective_io_concurrency",
    "maintenance_io_concurrency",
    "work_mem",
    "parallel_setup_cost",
    "parallel_tuple_cost",
    "max_parallel_workers_per_gather",
    "min_parallel_table_scan_size",
)

#: enable_* setting -> the node it allows (Aggregate means a hashed Aggregate)
ENABLES: Mapping[str, str] = {
    "enable_seqscan": "Seq Scan",
    "enable_indexscan": "Index Scan",
    "enable_indexonlyscan": "Index Only Scan",
    "enable_bitmapscan": "Bitmap Heap Scan",
    "enable_tidscan": "Tid Scan",
    "enable_nestloop": "Nested Loop",
    "enable_hashjoin": "Hash Join",
    "enable_mergejoin": "Merge Join",
    "enable_hashagg": "Aggregate",
    "enable_sort": "Sort",
    "enable_incremental_sort": "Incremental Sort",
    "enable_material": "Materialize",
    "enable_memoize": "Memoize",
    "enable_gathermerge": "Gather Merge",
}


def method_nodes(plan: Plan) -> set[str]:
    """The plan's node types, as ENABLES names them (an Aggregate counts only when hashed)."""
    found: set[str] = set()
    for _, node in plan.nodes():
        if node.node_type == "Aggregate" and node.strategy != "Hashed":
            continue
        found.add(node.node_type)
    return found


def forcing_settings(chosen: Plan, wanted: Plan) -> dict[str, str]:
    """Settings that forbid what `chosen` uses and `wanted` does not: the enable_* of each plan
    method only `chosen` has, and no parallel workers when only `chosen` gathers. Whether the
    planner then picks `wanted` is for EXPLAIN to say."""
    extra = method_nodes(chosen) - method_nodes(wanted)
    forced = {name: "off" for name, node in ENABLES.items() if node in extra}
    if extra & {"Gather", "Gather Merge"}:
        forced["max_parallel_workers_per_gather"] = "0"
    return forced


#: Cost settings tried one at a time (on top of the enable_* switches, then alone) to force a
#: plan where no enable_* switch forbids what differs: partial aggregation, a Gather. A high
#: parallel_tuple_cost turns partial aggregation off (no enable_* does: on TPC-H Q17, 18's plan
#: back to 17's), a zero one turns it on; the others make parallel plans cheaper or dearer.
PARALLEL_NUDGES: tuple[tuple[str, str], ...] = (
    ("parallel_tuple_cost", "5"),
    ("parallel_tuple_cost", "0"),
    ("parallel_setup_cost", "0"),
    ("parallel_setup_cost", "100000"),
    ("min_parallel_table_scan_size", "0"),
)


def cost_nudges(chosen: Plan, wanted: Plan) -> list[dict[str, str]]:
    """The cost settings worth trying to turn `chosen` into `wanted` (PARALLEL_NUDGES when the
    plans differ in parallelism or partial aggregation, else none)."""

    def parallel(plan: Plan) -> set[tuple[str, str]]:
        return {
            (node.node_type, node.partial_mode or "")
            for _, node in plan.nodes()
            if node.partial_mode or node.node_type in ("Gather", "Gather Merge")
        }

    if parallel(chosen) == parallel(wanted):
        return []
    return [{name: value} for name, value in PARALLEL_NUDGES]


def forces_in_candidate_units(settings: Mapping[str, str]) -> bool:
    """Settings that forbid plan methods without changing what the others cost (enable_*, the
    workers per Gather): a plan forced with them is costed as the planner costs it."""
    return all(name in ENABLES or name == "max_parallel_workers_per_gather" for name in settings)


_PLANNER_SETTING = re.compile(
    r"enable_\w+|\w+_cost|\w+_collapse_limit|geqo\w*|jit\w*|work_mem|hash_mem_multiplier"
    r"|effective_cache_size|effective_io_concurrency|default_statistics_target|plan_cache_mode"
    r"|constraint_exclusion|cursor_tuple_fraction|max_parallel_workers\w*|min_parallel_\w+"
    r"|parallel_\w+|search_path|recursive_worktable_factor|random_page_cost|seq_page_cost"
)


def is_planner_setting(name: str) -> bool:
    """A setting the planner reads (a change of it can flip plans)."""
    return _PLANNER_SETTING.fullmatch(name) is not None


#: settings renamed in a major version (old name, new name): a captured workload names them as
#: its source did, each replay target as it knows them
RENAMED_SETTINGS: Mapping[str, str] = {"force_parallel_mode": "debug_parallel_query"}
_RENAMED_BACK = {new: old for old, new in RENAMED_SETTINGS.items()}
#: per-session settings beyond the planner's that move the clock of the same plan
_SESSION_CLOCK_SETTINGS = ("io_combine_limit", "maintenance_io_concurrency")


def renamed_setting(name: str) -> str:
    """The other name of a renamed setting (either way); the name itself otherwise."""
    return RENAMED_SETTINGS.get(name) or _RENAMED_BACK.get(name) or name


def carried_setting(name: str) -> bool:
    """A setting `planshift capture` carries from production to every replay target when
    production does not run its default: what the planner reads, parallelism, and the
    per-session settings that move the clock of the same plan."""
    return (
        is_planner_setting(name)
        or name in PARALLEL_SETTINGS
        or name in _SESSION_CLOCK_SETTINGS
        or renamed_setting(name) != name
    )
