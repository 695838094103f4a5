"""Typed view of EXPLAIN (FORMAT JSON) output, normalized across PostgreSQL 15-18.

Version differences absorbed here (see DESIGN.md, "PostgreSQL facts that bite"):
I/O timing key names, fractional ``Actual Rows`` (18), ``Disabled`` (18) versus the
1e10 ``disable_cost`` added to costs (<= 17), ``Result Cache`` renamed ``Memoize``,
``InitPlan 1 (returns $0)`` versus ``InitPlan 1``, and the ``NoMovement`` scan direction
that 15 gives index scans of an index without order (GiST, hash, SP-GiST): 16+ says
``Forward``, as the text format of every version does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from detector.errors import PlanshiftError

DISABLE_COST = 1.0e10
NODE_TYPE_ALIASES = {"Result Cache": "Memoize"}
SCAN_DIRECTION_ALIASES = {"NoMovement": "Forward"}
_SUBPLAN_RETURNS = re.compile(r"\s*\(returns [^)]*\)\s*$")
_PARAMETER = re.compile(r"\$(\d+)")
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")
_NOT_EXPRESSIONS = frozenset(
    ("Plans", "Subplan Name", "Params Evaluated", "Relation Name", "Alias", "Schema", "CTE Name")
)


@dataclass(frozen=True)
class Buffers:
    shared_hit: int = 0
    shared_read: int = 0
    shared_dirtied: int = 0
    shared_written: int = 0
    local_hit: int = 0
    local_read: int = 0
    temp_read: int = 0
    temp_written: int = 0
    io_read_ms: float | None = None  # None: not measured (track_io_timing off)
    io_write_ms: float | None = None

    @property
    def shared_total(self) -> int:
        return self.shared_hit + self.shared_read


@dataclass(frozen=True)
class PlanNode:
    node_type: str
    relation: str | None = None
    schema: str | None = None
    alias: str | None = None
    index_name: str | None = None
    join_type: str | None = None
    strategy: str | None = None
    partial_mode: str | None = None
    parent_relationship: str | None = None
    scan_direction: str | None = None
    cte_name: str | None = None
    subplan_name: str | None = None
    startup_cost: float = 0.0
    total_cost: float = 0.0
    plan_rows: float = 0.0
    actual_rows: float | None = None
    actual_loops: float | None = None
    actual_total_ms: float | None = None
    disabled: bool = False
    workers_planned: int | None = None
    workers_launched: int | None = None
    sort_method: str | None = None
    sort_space_type: str | None = None
    hash_batches: int | None = None
    original_hash_batches: int | None = None
    exact_heap_blocks: int | None = None
    lossy_heap_blocks: int | None = None
    heap_fetches: int | None = None
    rows_removed_by_filter: float | None = None
    rows_removed_by_recheck: float | None = None
    buffers: Buffers = field(default_factory=Buffers)
    children: tuple[PlanNode, ...] = ()

    @property
    def qualified_relation(self) -> str | None:
        if self.relation is None:
            return None
        return f"{self.schema}.{self.relation}" if self.schema else self.relation

    @property
    def actual_rows_total(self) -> float | None:
        """Rows over all loops (EXPLAIN reports rows per loop)."""
        if self.actual_rows is None:
            return None
        return self.actual_rows * (self.actual_loops or 1.0)

    def walk(self, path: str = "0") -> Iterator[tuple[str, PlanNode]]:
        """Yield (path, node) depth-first; a path is the child indexes from the root, '0.1.0'."""
        yield path, self
        for i, child in enumerate(self.children):
            yield from child.walk(f"{path}.{i}")


@dataclass(frozen=True)
class Plan:
    root: PlanNode
    planning_ms: float | None = None
    execution_ms: float | None = None
    settings: Mapping[str, str] = field(default_factory=dict)
    jit_used: bool = False
    jit_total_ms: float | None = None
    query_text: str | None = None
    query_id: int | None = None
    generic: bool = False  # planned without parameter values: a prepared statement's generic plan
    # the EXPLAIN JSON text it was parsed from, when it came as text: what a report offers to
    # copy (conditions, filters and output lists included); not part of the plan's identity
    source: str | None = field(default=None, compare=False, repr=False)

    @property
    def total_cost(self) -> float:
        return normalized_cost(self.root.total_cost)

    @property
    def startup_cost(self) -> float:
        return normalized_cost(self.root.startup_cost)

    @property
    def analyzed(self) -> bool:
        return self.root.actual_rows is not None

    def nodes(self) -> Iterator[tuple[str, PlanNode]]:
        return self.root.walk()

    def buffers_total(self) -> Buffers:
        """Buffers of the root node: EXPLAIN already sums children into parents."""
        return self.root.buffers


def normalized_cost(cost: float) -> float:
    """Remove PG <= 17's disable_cost (1e10 per disabled node) so costs compare across versions."""
    if cost >= DISABLE_COST:
        return cost - DISABLE_COST * (cost // DISABLE_COST)
    return cost


def _int(raw: Mapping[str, Any], key: str) -> int:
    value = raw.get(key, 0)
    return int(value) if isinstance(value, (int, float)) else 0


def _opt_int(raw: Mapping[str, Any], key: str) -> int | None:
    value = raw.get(key)
    return int(value) if isinstance(value, (int, float)) else None


def _opt_float(raw: Mapping[str, Any], key: str) -> float | None:
    value = raw.get(key)
    return float(value) if isinstance(value, (int, float)) else None


def _opt_str(raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    return str(value) if value is not None else None


def _buffers(raw: Mapping[str, Any]) -> Buffers:
    return Buffers(
        shared_hit=_int(raw, "Shared Hit Blocks"),
        shared_read=_int(raw, "Shared Read Blocks"),
        shared_dirtied=_int(raw, "Shared Dirtied Blocks"),
        shared_written=_int(raw, "Shared Written Blocks"),
        local_hit=_int(raw, "Local Hit Blocks"),
        local_read=_int(raw, "Local Read Blocks"),
        temp_read=_int(raw, "Temp Read Blocks"),
        temp_written=_int(raw, "Temp Written Blocks"),
        io_read_ms=_io_time(raw, "Shared I/O Read Time", "I/O Read Time"),
        io_write_ms=_io_time(raw, "Shared I/O Write Time", "I/O Write Time"),
    )


def _io_time(raw: Mapping[str, Any], new: str, old: str) -> float | None:
    """An I/O time in ms under its 17+ or its 15-16 key; None when EXPLAIN did not show it."""
    value = raw.get(new, raw.get(old))
    return float(value) if isinstance(value, (int, float)) else None


def _subplan_name(raw: Mapping[str, Any]) -> str | None:
    name = raw.get("Subplan Name")
    if not isinstance(name, str):
        return None
    return _SUBPLAN_RETURNS.sub("", name)


def _scan_direction(raw: Mapping[str, Any]) -> str | None:
    direction = _opt_str(raw, "Scan Direction")
    return SCAN_DIRECTION_ALIASES.get(direction, direction) if direction else None


def plan_parameters(raw: Mapping[str, Any]) -> frozenset[int]:
    """The `$n` parameters a plan's expressions (conditions, keys, outputs) reference.

    A custom plan has the values in their place; a generic plan keeps `$1`. On 15-16 an
    InitPlan's outputs are `$0`, `$1` ... too: those named by `InitPlan 1 (returns $0)` are
    left out. Quoted literals and names are not expressions.
    """
    found: set[int] = set()
    produced: set[int] = set()
    stack = [raw]
    while stack:
        node = stack.pop()
        name = node.get("Subplan Name")
        if isinstance(name, str) and "(returns " in name:
            produced.update(int(n) for n in _PARAMETER.findall(name))
        for key, value in node.items():
            # most values are numbers and flags: only strings and lists can hold a `$n`
            if isinstance(value, str):
                texts: list[Any] = [value] if "$" in value else []
            elif isinstance(value, list):
                if key == "Plans":
                    stack.extend(child for child in value if isinstance(child, Mapping))
                    continue
                texts = value
            else:
                continue
            if key in _NOT_EXPRESSIONS:
                continue
            for text in texts:
                if isinstance(text, str) and "$" in text:
                    found.update(int(n) for n in _PARAMETER.findall(_QUOTED.sub("", text)))
    return frozenset(found - produced)


def parse_node(raw: Mapping[str, Any]) -> PlanNode:
    if not isinstance(raw, Mapping) or "Node Type" not in raw:
        raise PlanshiftError(
            "plan node without 'Node Type'", "is this EXPLAIN (FORMAT JSON) output?"
        )
    node_type = str(raw["Node Type"])
    children = raw.get("Plans") or []
    return PlanNode(
        node_type=NODE_TYPE_ALIASES.get(node_type, node_type),
        relation=_opt_str(raw, "Relation Name"),
        schema=_opt_str(raw, "Schema"),
        alias=_opt_str(raw, "Alias"),
        index_name=_opt_str(raw, "Index Name"),
        join_type=_opt_str(raw, "Join Type"),
        strategy=_opt_str(raw, "Strategy"),
        partial_mode=_opt_str(raw, "Partial Mode"),
        parent_relationship=_opt_str(raw, "Parent Relationship"),
        scan_direction=_scan_direction(raw),
        cte_name=_opt_str(raw, "CTE Name"),
        subplan_name=_subplan_name(raw),
        startup_cost=float(raw.get("Startup Cost", 0.0)),
        total_cost=float(raw.get("Total Cost", 0.0)),
        plan_rows=float(raw.get("Plan Rows", 0.0)),
        actual_rows=_opt_float(raw, "Actual Rows"),
        actual_loops=_opt_float(raw, "Actual Loops"),
        actual_total_ms=_opt_float(raw, "Actual Total Time"),
        disabled=bool(raw.get("Disabled", False))
        or float(raw.get("Total Cost", 0.0)) >= DISABLE_COST,
        workers_planned=_opt_int(raw, "Workers Planned"),
        workers_launched=_opt_int(raw, "Workers Launched"),
        sort_method=_opt_str(raw, "Sort Method"),
        sort_space_type=_opt_str(raw, "Sort Space Type"),
        hash_batches=_opt_int(raw, "Hash Batches"),
        original_hash_batches=_opt_int(raw, "Original Hash Batches"),
        exact_heap_blocks=_opt_int(raw, "Exact Heap Blocks"),
        lossy_heap_blocks=_opt_int(raw, "Lossy Heap Blocks"),
        heap_fetches=_opt_int(raw, "Heap Fetches"),
        rows_removed_by_filter=_opt_float(raw, "Rows Removed by Filter"),
        rows_removed_by_recheck=_opt_float(raw, "Rows Removed by Index Recheck"),
        buffers=_buffers(raw),
        children=tuple(parse_node(child) for child in children),
    )


def _decoded(document: str | bytes) -> Any:
    """JSON by orjson (4x faster: the runner parses every measured plan), by the standard
    library where orjson refuses what PostgreSQL can write (an integer over 64 bits: rows)."""
    try:
        return orjson.loads(document)
    except orjson.JSONDecodeError:
        try:
            return json.loads(document)
        except json.JSONDecodeError as exc:
            raise PlanshiftError(f"plan is not valid JSON: {exc}") from exc


def parse_plan(document: Any) -> Plan:
    """Parse EXPLAIN (FORMAT JSON) output: the top-level list, its single object, or a JSON string.

    auto_explain's JSON output (an object with "Query Text" and "Plan") is accepted too.
    """
    source = None
    if isinstance(document, (str, bytes)):
        source = document.decode() if isinstance(document, bytes) else document
        document = _decoded(document)
    if isinstance(document, list):
        if len(document) != 1:
            raise PlanshiftError(f"expected one plan in EXPLAIN output, found {len(document)}")
        document = document[0]
    if not isinstance(document, Mapping) or "Plan" not in document:
        raise PlanshiftError("EXPLAIN output has no 'Plan' key", "expected EXPLAIN (FORMAT JSON)")
    jit = document.get("JIT") or {}
    timing = jit.get("Timing") if isinstance(jit, Mapping) else None
    jit_total = None
    if isinstance(timing, Mapping):
        total = timing.get("Total")
        jit_total = float(total) if isinstance(total, (int, float)) else None
    settings = document.get("Settings") or {}
    query_id = document.get("Query Identifier")
    return Plan(
        root=parse_node(document["Plan"]),
        planning_ms=_opt_float(document, "Planning Time"),
        execution_ms=_opt_float(document, "Execution Time"),
        settings={str(k): str(v) for k, v in settings.items()},
        jit_used=bool(jit) and int(jit.get("Functions", 0) or 0) > 0,
        jit_total_ms=jit_total,
        query_text=_opt_str(document, "Query Text"),
        query_id=int(query_id) if isinstance(query_id, int) else None,
        generic=bool(plan_parameters(document["Plan"])),
        source=source,
    )
