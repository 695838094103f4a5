"""Each plan's EXPLAIN JSON in the HTML report: a copy button and a download link (a data: URL).

A plan read from EXPLAIN JSON text (the store's, a log's) carries that text (`Plan.source`) and
the page offers it as PostgreSQL wrote it. A plan built from a parsed document has none: its JSON
is rebuilt from what the model keeps (node types, relations, indexes, join types, strategies,
costs, estimated and actual rows, loops, times, buffers, sort and hash details; no conditions,
filters or output lists), and reads back into the same plan (`parse_plan`). Each distinct
JSON is in the page once, compressed (PlanDocuments); the page's script makes the links' data:
URLs from it, and the buttons copy the link's JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from detector.model import Buffers, Plan, PlanNode

#: PlanNode field -> EXPLAIN (FORMAT JSON) key, in EXPLAIN's order (the inverse of parse_node).
NODE_KEYS = (
    ("node_type", "Node Type"),
    ("parent_relationship", "Parent Relationship"),
    ("subplan_name", "Subplan Name"),
    ("strategy", "Strategy"),
    ("partial_mode", "Partial Mode"),
    ("join_type", "Join Type"),
    ("scan_direction", "Scan Direction"),
    ("index_name", "Index Name"),
    ("relation", "Relation Name"),
    ("schema", "Schema"),
    ("alias", "Alias"),
    ("cte_name", "CTE Name"),
    ("startup_cost", "Startup Cost"),
    ("total_cost", "Total Cost"),
    ("plan_rows", "Plan Rows"),
    ("actual_total_ms", "Actual Total Time"),
    ("actual_rows", "Actual Rows"),
    ("actual_loops", "Actual Loops"),
    ("workers_planned", "Workers Planned"),
    ("workers_launched", "Workers Launched"),
    ("sort_method", "Sort Method"),
    ("sort_space_type", "Sort Space Type"),
    ("hash_batches", "Hash Batches"),
    ("original_hash_batches", "Original Hash Batches"),
    ("exact_heap_blocks", "Exact Heap Blocks"),
    ("lossy_heap_blocks", "Lossy Heap Blocks"),
    ("heap_fetches", "Heap Fetches"),
    ("rows_removed_by_filter", "Rows Removed by Filter"),
    ("rows_removed_by_recheck", "Rows Removed by Index Recheck"),
)
BUFFER_KEYS = (
    ("shared_hit", "Shared Hit Blocks"),
    ("shared_read", "Shared Read Blocks"),
    ("shared_dirtied", "Shared Dirtied Blocks"),
    ("shared_written", "Shared Written Blocks"),
    ("local_hit", "Local Hit Blocks"),
    ("local_read", "Local Read Blocks"),
    ("temp_read", "Temp Read Blocks"),
    ("temp_written", "Temp Written Blocks"),
    ("io_read_ms", "I/O Read Time"),
    ("io_write_ms", "I/O Write Time"),
)
ALWAYS = ("Shared Hit Blocks", "Shared Read Blocks")  # zero counters are left out but these
JSON_NOTE = (
    "EXPLAIN JSON rebuilt from the plan planshift keeps (nodes, relations, indexes, costs, rows, "
    "loops, times, buffers; no conditions or output lists): paste it into pev2 / "
    "explain.dalibo.com"
)


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def _buffers(buffers: Buffers) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, key in BUFFER_KEYS:
        value = getattr(buffers, field)
        if value is None or (value == 0 and isinstance(value, int) and key not in ALWAYS):
            continue
        out[key] = _number(value)
    return out


def node_document(node: PlanNode) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, key in NODE_KEYS:
        value = getattr(node, field)
        if value is not None:
            out[key] = _number(value) if isinstance(value, float) else value
    if node.disabled:
        out["Disabled"] = True
    out.update(_buffers(node.buffers))
    if node.children:
        out["Plans"] = [node_document(child) for child in node.children]
    return out


def explain_json(plan: Plan) -> str:
    """PostgreSQL's own EXPLAIN JSON when the plan was read from it (the store keeps it), else
    `[{"Plan": ..., "Planning Time": ..., "Execution Time": ...}]` rebuilt from the model."""
    if plan.source is not None:
        original = json.loads(plan.source)
        return json.dumps(original if isinstance(original, list) else [original], indent=2)
    return rebuilt_json(plan)


def rebuilt_json(plan: Plan) -> str:
    """`[{"Plan": ..., "Planning Time": ..., "Execution Time": ...}]` as EXPLAIN prints it."""
    document: dict[str, Any] = {"Plan": node_document(plan.root)}
    if plan.settings:
        document["Settings"] = dict(plan.settings)
    if plan.planning_ms is not None:
        document["Planning Time"] = plan.planning_ms
    if plan.execution_ms is not None:
        document["Execution Time"] = plan.execution_ms
    return json.dumps([document], indent=2)


@dataclass(frozen=True)
class PlanControls:
    """A copy button and a download link for one plan's JSON (`element_id` is the link's id)."""

    element_id: str
    document_id: str  # the document's place in PlanDocuments' list
    file_name: str
    note: str  # "" for PostgreSQL's own JSON (the usual case), JSON_NOTE when rebuilt


class PlanDocuments:
    """Each distinct EXPLAIN JSON of a page once, packed together (html_env.pack: a sweep's 64
    plans differ in a few numbers, 214 kB of JSON deflate to 4.5 kB). The page's script unpacks
    them, gives each download link its data: URL and each copy button the text."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def controls(self, plan: Plan, element_id: str, file_name: str) -> PlanControls:
        text = explain_json(plan)
        document = self._ids.setdefault(text, len(self._ids))
        note = "" if plan.source is not None else JSON_NOTE
        return PlanControls(element_id, str(document), file_name, note)

    def texts(self) -> list[str]:
        """The documents, in the order of their ids."""
        return list(self._ids)
