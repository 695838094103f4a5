"""Plan shape: a hash stable across constants, costs, rows, timings, buffers, workers and aliases.

Kept per node: Node Type, Strategy, Partial Mode, Join Type, Parent Relationship, Scan
Direction, (schema-qualified) Relation Name, Index Name, CTE and SubPlan names, child order.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from detector.model.plan import Plan, PlanNode

SHAPE_KEYS = (
    "node_type",
    "strategy",
    "partial_mode",
    "join_type",
    "parent_relationship",
    "scan_direction",
    "relation",
    "index_name",
    "cte_name",
    "subplan_name",
)

_SHORT_NAMES = {
    "Seq Scan": "SeqScan",
    "Index Scan": "IndexScan",
    "Index Only Scan": "IndexOnlyScan",
    "Bitmap Heap Scan": "BitmapHeapScan",
    "Bitmap Index Scan": "BitmapIndexScan",
    "Nested Loop": "NestedLoop",
    "Hash Join": "HashJoin",
    "Merge Join": "MergeJoin",
    "Incremental Sort": "IncrementalSort",
    "Gather Merge": "GatherMerge",
    "Function Scan": "FunctionScan",
    "CTE Scan": "CteScan",
    "Subquery Scan": "SubqueryScan",
    "Values Scan": "ValuesScan",
    "Tid Scan": "TidScan",
    "Tid Range Scan": "TidRangeScan",
    "Foreign Scan": "ForeignScan",
    "Custom Scan": "CustomScan",
    "Sample Scan": "SampleScan",
    "WorkTable Scan": "WorkTableScan",
    "Named Tuplestore Scan": "NamedTuplestoreScan",
    "Table Function Scan": "TableFunctionScan",
    "Merge Append": "MergeAppend",
    "Recursive Union": "RecursiveUnion",
    "Lock Rows": "LockRows",
    "Project Set": "ProjectSet",
    "Set Operation": "SetOp",
    "Modify Table": "ModifyTable",
}


def node_shape(node: PlanNode) -> dict[str, Any]:
    shape: dict[str, Any] = {}
    for key in SHAPE_KEYS:
        value = getattr(node, key)
        if key == "relation" and value is not None:
            value = node.qualified_relation
        if value is not None:
            shape[key] = value
    if node.children:
        shape["children"] = [node_shape(child) for child in node.children]
    return shape


def shape_json(plan: Plan) -> str:
    """Canonical JSON of the plan shape (sorted keys, no whitespace): what the fingerprint hashes."""
    return json.dumps(node_shape(plan.root), sort_keys=True, separators=(",", ":"))


def fingerprint(plan: Plan) -> str:
    return hashlib.sha256(shape_json(plan).encode()).hexdigest()[:16]


def short_name(node: PlanNode) -> str:
    return _SHORT_NAMES.get(node.node_type, node.node_type.replace(" ", ""))


def node_label(node: PlanNode) -> str:
    """One node as text: `IndexScan(sbtest1 sbtest1_pkey)`, `HashJoin[Left]`, `Aggregate[Hashed]`."""
    name = short_name(node)
    qualifiers = [q for q in (node.join_type, node.strategy, node.partial_mode) if q]
    if node.join_type == "Inner":
        qualifiers.remove("Inner")
    for implicit in ("Plain", "Simple"):
        if implicit in qualifiers:
            qualifiers.remove(implicit)
    if qualifiers:
        name += "[" + ",".join(qualifiers) + "]"
    target = [t for t in (node.qualified_relation, node.index_name, node.cte_name) if t]
    if node.scan_direction == "Backward":
        target.append("backward")
    if target:
        name += "(" + " ".join(target) + ")"
    return name


def signature(plan: Plan) -> str:
    """One line a human and a rule can read: `Aggregate > BitmapHeapScan(t) > BitmapIndexScan(t_pkey)`.

    A node with one child is followed by ` > child`; several children are `{a; b}` in plan order
    (for a join: outer first, so the order of relations is the join order).
    """
    return _signature_of(plan.root)


def _signature_of(node: PlanNode) -> str:
    label = node_label(node)
    if node.subplan_name:
        label = f"{node.subplan_name}: {label}"
    if not node.children:
        return label
    if len(node.children) == 1:
        return f"{label} > {_signature_of(node.children[0])}"
    return label + " {" + "; ".join(_signature_of(child) for child in node.children) + "}"


@dataclass(frozen=True)
class ScanAccess:
    """How one relation is read in a plan: the unit plan-flip rules compare node by node."""

    relation: str
    node_type: str
    index_name: str | None
    path: str


def scan_accesses(plan: Plan) -> list[ScanAccess]:
    """Relation-reading nodes; a Bitmap Heap Scan takes the index of its Bitmap Index Scan child."""
    accesses: list[ScanAccess] = []
    for path, node in plan.nodes():
        relation = node.qualified_relation
        if relation is None:
            continue
        index = node.index_name
        if node.node_type == "Bitmap Heap Scan":
            index = _bitmap_index(node)
        accesses.append(ScanAccess(relation, node.node_type, index, path))
    return accesses


def _bitmap_index(node: PlanNode) -> str | None:
    names = sorted(
        {
            n.index_name
            for _, n in node.walk()
            if n.node_type == "Bitmap Index Scan" and n.index_name
        }
    )
    return ",".join(names) if names else None
