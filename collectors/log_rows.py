"""Observation rows straight from auto_explain JSON, with plan shapes parsed once.

A log repeats the same few plan shapes millions of times. `ShapeCache` keys each plan by the raw
values that make its shape (the fields `detector.model` fingerprints, read from the JSON
dicts, children in order), so `parse_plan` and `fingerprint` run once per distinct shape;
for every other entry the numbers of the row are read from the root node's JSON as
`detector.store_rows` reads them from the parsed plan (a test checks both give equal rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from detector.model import fingerprint, normalized_cost, parse_plan, shape_json, signature
from detector.store import OBSERVATION_COLUMNS, NewPlan, plan_node_rows, to_utc_naive

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
_BUFFER_KEYS = (
    "Shared Hit Blocks", "Shared Read Blocks", "Shared Dirtied Blocks", "Shared Written Blocks",
    "Temp Read Blocks", "Temp Written Blocks",
)  # fmt: skip


class ShapeError(Exception):
    """The plan JSON is not a plan (a node without Node Type, a cost that is not a number)."""


def shape_key(node: dict[str, Any], heap: list[int | None]) -> tuple[Any, ...]:
    """Hashable shape of a raw plan node; sums Exact/Lossy Heap Blocks into heap[0], heap[1]."""
    if not isinstance(node, dict):
        raise ShapeError("plan node is not an object")
    exact = node.get("Exact Heap Blocks")
    if isinstance(exact, (int, float)):
        heap[0] = (heap[0] or 0) + int(exact)
    lossy = node.get("Lossy Heap Blocks")
    if isinstance(lossy, (int, float)):
        heap[1] = (heap[1] or 0) + int(lossy)
    values = tuple(map(node.get, _SHAPE_FIELDS))
    children = node.get("Plans")
    if children:
        if not isinstance(children, list):
            raise ShapeError("Plans is not a list")
        return (values, tuple(shape_key(child, heap) for child in children))
    return values


def _number(node: dict[str, Any], key: str) -> float:
    value = node.get(key, 0.0)
    if not isinstance(value, (int, float)):
        raise ShapeError(f"{key} is not a number")
    return float(value)


def _count(node: dict[str, Any], key: str) -> int:
    value = node.get(key, 0)
    return int(value) if isinstance(value, (int, float)) else 0


@dataclass
class ShapeCache:
    """fingerprint per raw shape; new shapes are handed out once, as NewPlan for the store."""

    fingerprints: dict[tuple[Any, ...], str]
    limit: int = 100_000

    def lookup(
        self, document: dict[str, Any], plan_json: Any, collected_at: datetime
    ) -> tuple[str, NewPlan | None, list[int | None]]:
        heap: list[int | None] = [None, None]
        root = document.get("Plan")
        if not isinstance(root, dict):
            raise ShapeError("no Plan object")
        key = shape_key(root, heap)
        known = self.fingerprints.get(key)
        if known is not None:
            return known, None, heap
        try:
            plan = parse_plan(document)
        except Exception as exc:  # the model's own errors, or a wrong type in the JSON
            raise ShapeError(str(exc)) from None
        found = fingerprint(plan)
        if len(self.fingerprints) > self.limit:
            self.fingerprints.clear()
        self.fingerprints[key] = found
        first_seen = to_utc_naive(collected_at)
        new = NewPlan(
            found,
            signature(plan),
            shape_json(plan),
            plan_json() if callable(plan_json) else plan_json,
            first_seen,
            plan_node_rows(found, plan),
        )
        return found, new, heap


def observation_row(
    document: dict[str, Any],
    *,
    run_id: int,
    target_id: int,
    query_key: str,
    params: str,
    fingerprint_: str,
    heap: list[int | None],
    duration_ms: float | None,
    collected_at: datetime,
) -> tuple[Any, ...]:
    """The `observations` row (ROW_COLUMNS order) of one logged plan."""
    root = document["Plan"]
    actual = root.get("Actual Rows")
    actual_total = None
    if isinstance(actual, (int, float)):
        loops = root.get("Actual Loops")
        actual_total = float(actual) * (
            float(loops) if isinstance(loops, (int, float)) and loops else 1.0
        )
    execution = document.get("Execution Time")
    planning = document.get("Planning Time")
    io_read = root.get("Shared I/O Read Time", root.get("I/O Read Time", 0.0)) or 0.0
    return (
        run_id, target_id, query_key, None, params, 0, fingerprint_, "log",
        normalized_cost(_number(root, "Total Cost")),
        normalized_cost(_number(root, "Startup Cost")),
        _number(root, "Plan Rows"),
        actual_total,
        float(execution) if isinstance(execution, (int, float)) else duration_ms,
        float(planning) if isinstance(planning, (int, float)) else None,
        None,
        *[_count(root, key) for key in _BUFFER_KEYS],
        heap[0], heap[1],
        float(io_read) if isinstance(io_read, (int, float)) else 0.0,
        to_utc_naive(collected_at),
    )  # fmt: skip
