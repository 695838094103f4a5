"""What EXPLAIN says about each node beyond its shape: the conditions it applied and the counters
that explain a plan flip (what pev2 / explain.dalibo.com shows on every node).

The plan model keeps shapes and numbers (detector.model.plan); the conditions are text of the
EXPLAIN JSON a plan was read from (`Plan.source`: the store's, a log's, a text plan read as
JSON). `node_details(plan)` reads them by node path, in the order PostgreSQL prints them; a plan
built from a parsed document has no source and gets the counters alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from detector.model.plan import Plan, PlanNode

#: Expression keys of EXPLAIN (FORMAT JSON), in the order EXPLAIN prints them under a node.
CONDITION_KEYS = (
    "Hash Cond",
    "Merge Cond",
    "Join Filter",
    "Index Cond",
    "Recheck Cond",
    "TID Cond",
    "Filter",
    "One-Time Filter",
    "Run Condition",
    "Sort Key",
    "Presorted Key",
    "Group Key",
    "Hash Key",
    "Cache Key",
)


@dataclass(frozen=True)
class NodeDetails:
    """`conditions` and `counters` as (name, text) pairs, named as EXPLAIN names them."""

    conditions: tuple[tuple[str, str], ...] = ()
    counters: tuple[tuple[str, str], ...] = ()

    def items(self) -> tuple[tuple[str, str], ...]:
        return self.conditions + self.counters


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and value and all(isinstance(v, str) for v in value):
        return ", ".join(value)  # Sort Key, Group Key: one expression per item
    return None


def _count(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value != int(value) else f"{int(value):,}"


def node_counters(node: PlanNode) -> tuple[tuple[str, str], ...]:
    """The per-node counters that explain a flip, from the plan model (no source needed)."""
    found: list[tuple[str, str]] = []
    if node.rows_removed_by_filter:
        found.append(("Rows Removed by Filter", _count(node.rows_removed_by_filter)))
    if node.rows_removed_by_recheck:
        found.append(("Rows Removed by Index Recheck", _count(node.rows_removed_by_recheck)))
    if node.exact_heap_blocks is not None or node.lossy_heap_blocks is not None:
        blocks = f"exact={node.exact_heap_blocks or 0:,} lossy={node.lossy_heap_blocks or 0:,}"
        found.append(("Heap Blocks", blocks))
    if node.heap_fetches is not None:
        found.append(("Heap Fetches", _count(node.heap_fetches)))
    if node.workers_planned is not None or node.workers_launched is not None:
        planned, launched = node.workers_planned, node.workers_launched
        found.append(("Workers", f"planned {_count(planned)}, launched {_count(launched)}"))
    if node.sort_method:
        space = f" ({node.sort_space_type})" if node.sort_space_type else ""
        found.append(("Sort Method", node.sort_method + space))
    if node.hash_batches is not None and (
        node.hash_batches > 1 or (node.original_hash_batches or 1) > 1
    ):
        found.append(("Hash Batches", f"{node.hash_batches:,}"))
    return tuple(found)


def _conditions(raw: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    found = []
    for key in CONDITION_KEYS:
        text = _text(raw.get(key))
        if text:
            found.append((key, text))
    return tuple(found)


def node_details(plan: Plan) -> dict[str, NodeDetails]:
    """Each node's details by path (`0`, `0.1`, ... as `Plan.nodes()` gives them)."""
    raw_nodes = _raw_nodes(plan)
    return {
        path: NodeDetails(_conditions(raw_nodes.get(path, {})), node_counters(node))
        for path, node in plan.nodes()
    }


def _raw_nodes(plan: Plan) -> dict[str, Mapping[str, Any]]:
    """The source document's nodes by path; none when the plan has no source or it is not a
    readable EXPLAIN document (the counters still come from the model)."""
    if plan.source is None:
        return {}
    try:
        document = json.loads(plan.source)
    except ValueError:  # the plan was parsed from it, so only a source set by hand
        return {}
    if isinstance(document, list) and len(document) == 1:
        document = document[0]
    root = document.get("Plan") if isinstance(document, Mapping) else None
    found: dict[str, Mapping[str, Any]] = {}
    stack: list[tuple[str, Any]] = [("0", root)]
    while stack:
        path, raw = stack.pop()
        if not isinstance(raw, Mapping):
            continue
        found[path] = raw
        children = raw.get("Plans")
        if isinstance(children, list):
            stack.extend((f"{path}.{i}", child) for i, child in enumerate(children))
    return found
