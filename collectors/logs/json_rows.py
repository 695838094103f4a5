"""Observation rows straight from auto_explain JSON, with plan shapes parsed once.

A log repeats the same few plan shapes millions of times. `ShapeCache` keys each plan by the raw
values that make its shape (the fields `detector.model` fingerprints, read from the JSON
dicts, children in order), so `parse_plan` and `fingerprint` run once per distinct shape;
for every other entry the numbers of the row are read from the root node's JSON as
`detector.model.rows` reads them from the parsed plan (a test checks both give equal rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from detector.model import fingerprint, normalized_cost, parse_plan, shape_json, signature
from detector.model.records import OBSERVATION_COLUMNS, to_utc_naive
from detector.model.rows import NewPlan, plan_node_rows

_SHAPE_FIELDS = (
    "Node Type", "Strategy", "Partial Mode", "Join Type", "Parent Relationship",
    "Scan Direction", "Relation Name", "Schema", "Index Name", "CTE Name", "Subplan Name",
)  # fmt: skip
# the observation columns this module fills, in OBSERVATION_COLUMNS order (without the id)
ROW_COLUMNS = (
    "run_id", "target_id", "query_key", "point", "params", "sample_index", "fingerprint",
    "source", "total_cost", "startup_cost", "plan_rows", "actual_rows", "duration_ms",
    "planning_ms", "client_ms", "shared_hit", "shared_read", "shared_dirtied",
    "shared_written", "temp_read", "temp_written", "exact_heap_blocks", "lossy_heap_blocks",
    "io_read_ms", "collected_at",
)  # fmt: skip
FAST_PATH = tuple(OBSERVATION_COLUMNS[1:]) == ROW_COLUMNS
_ROOT_KEYS = (
    "Total Cost", "Startup Cost", "Plan Rows", "Actual Rows", "Actual Loops",
    "Shared Hit Blocks", "Shared Read Blocks", "Shared Dirtied Blocks", "Shared Written Blocks",
    "Temp Read Blocks", "Temp Written Blocks", "Shared I/O Read Time", "I/O Read Time",
)  # fmt: skip
_NUMBER = (int, float)


class ShapeError(Exception):
    """The plan JSON is not a plan (a node without Node Type, a cost that is not a number)."""


def shape_key(node: Any) -> tuple[Any, ...]:
    """Hashable shape of a raw plan node; AttributeError or TypeError when it is no object."""
    values = tuple(map(node.get, _SHAPE_FIELDS))
    children = node.get("Plans")
    if children:
        return (values, tuple(map(shape_key, children)))
    return values


def add_heap_blocks(node: dict[str, Any], heap: list[int | None]) -> None:
    """Sum Exact/Lossy Heap Blocks of the tree into heap[0], heap[1] (None when absent)."""
    exact = node.get("Exact Heap Blocks")
    if isinstance(exact, _NUMBER):
        heap[0] = (heap[0] or 0) + int(exact)
    lossy = node.get("Lossy Heap Blocks")
    if isinstance(lossy, _NUMBER):
        heap[1] = (heap[1] or 0) + int(lossy)
    for child in node.get("Plans") or ():
        add_heap_blocks(child, heap)


@dataclass
class ShapeCache:
    """fingerprint per raw shape; new shapes are handed out once, as NewPlan for the store.

    Keys are `shape_key` tuples (general path) or `log_fast.ShapeNode` structs (fast path)."""

    fingerprints: dict[Any, str]
    limit: int = 100_000

    def lookup(
        self, document: dict[str, Any], plan_json: Any, collected_at: datetime
    ) -> tuple[str, NewPlan | None]:
        """The plan's fingerprint, and its NewPlan when this cache sees the shape first."""
        try:
            key = shape_key(document["Plan"])
        except (AttributeError, TypeError):
            raise ShapeError("a plan node is not an object") from None
        known = self.fingerprints.get(key)
        if known is not None:
            return known, None
        return self.add(key, document, plan_json, collected_at)

    def add(
        self, key: Any, document: dict[str, Any], plan_json: Any, collected_at: datetime
    ) -> tuple[str, NewPlan]:
        try:
            plan = parse_plan(document)
        except Exception as exc:  # the model's own errors, or a wrong type in the JSON
            raise ShapeError(str(exc)) from None
        found = fingerprint(plan)
        if len(self.fingerprints) > self.limit:
            self.fingerprints.clear()
        self.fingerprints[key] = found
        new = NewPlan(
            found,
            signature(plan),
            shape_json(plan),
            plan_json() if callable(plan_json) else plan_json,
            to_utc_naive(collected_at),
            plan_node_rows(found, plan),
        )
        return found, new


def observation_row(
    document: dict[str, Any],
    head: tuple[
        Any, ...
    ],  # run_id, target_id, query_key, point, params, sample_index, fingerprint, source
    heap: list[int | None],
    duration_ms: float | None,
    collected_at: datetime,
) -> tuple[Any, ...]:
    """The `observations` row (ROW_COLUMNS order) of one logged plan."""
    root = document["Plan"]
    total, startup, rows, actual, loops, *buffers, io_new, io_old = map(root.get, _ROOT_KEYS)
    if isinstance(actual, _NUMBER):
        scale = float(loops) if isinstance(loops, _NUMBER) and loops else 1.0
        actual = float(actual) * scale
    else:
        actual = None
    execution = document.get("Execution Time")
    planning = document.get("Planning Time")
    io_read = io_new if io_new is not None else io_old
    return (
        *head,
        normalized_cost(_number(root, total, "Total Cost")),
        normalized_cost(_number(root, startup, "Startup Cost")),
        _number(root, rows, "Plan Rows"),
        actual,
        float(execution) if isinstance(execution, _NUMBER) else duration_ms,
        float(planning) if isinstance(planning, _NUMBER) else None,
        None,
        *[b if b.__class__ is int else _count(b) for b in buffers],
        heap[0], heap[1],
        float(io_read) if isinstance(io_read, _NUMBER) else None,
        to_utc_naive(collected_at),
    )  # fmt: skip


def _number(node: dict[str, Any], value: Any, key: str) -> float:
    if value is None and key not in node:
        return 0.0
    if not isinstance(value, _NUMBER):
        raise ShapeError(f"{key} is not a number")
    return float(value)


def _count(value: Any) -> int:
    return int(value) if isinstance(value, _NUMBER) else 0
