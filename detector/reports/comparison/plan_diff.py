"""Align two plan trees node by node for a side-by-side diff.

Nodes are matched by what they are, not where they are: a scan matches the scan of the same
relation (same node type and index: `same`; another scan type or index: `changed`), a node
without a relation matches one of the same node type (`same`, or `changed` when its strategy
or join type differs), and one join method matches another (`changed`). The pre-order lists of
both trees are aligned by the best total match score (Needleman-Wunsch with free gaps), so the
diff keeps each tree's order and indentation. A node left unmatched is `removed`/`added`, or
`moved` when a node of the same kind sits elsewhere in the other tree (join order changed).
"""

from __future__ import annotations

from dataclasses import dataclass

from detector.model import Plan, PlanNode

JOIN_TYPES = {"Nested Loop", "Hash Join", "Merge Join"}
SHAPE_FIELDS = (
    "node_type",
    "strategy",
    "partial_mode",
    "join_type",
    "scan_direction",
    "index_name",
    "qualified_relation",
    "cte_name",
    "subplan_name",
)


@dataclass(frozen=True)
class FlatNode:
    path: str
    depth: int
    node: PlanNode


@dataclass(frozen=True)
class DiffRow:
    """One line of the side-by-side diff; `status` is same, changed, removed, added or moved."""

    baseline: FlatNode | None
    candidate: FlatNode | None
    status: str
    changes: tuple[str, ...] = ()


def flatten(plan: Plan) -> list[FlatNode]:
    return [FlatNode(path, path.count("."), node) for path, node in plan.nodes()]


def _identity(node: PlanNode) -> str:
    """What a node is about: its relation (a scan) or its node type."""
    return node.qualified_relation or node.cte_name or node.node_type


def score(left: PlanNode, right: PlanNode) -> int:
    """How well two nodes match: 0 never, 1 join method changed, 2 relation or kind, 4 identical."""
    if left.qualified_relation or right.qualified_relation:
        if left.qualified_relation != right.qualified_relation:
            return 0
        return 4 if not changed_fields(left, right) else 3
    if left.node_type == right.node_type:
        return 4 if not changed_fields(left, right) else 2
    if left.node_type in JOIN_TYPES and right.node_type in JOIN_TYPES:
        return 1
    return 0


def changed_fields(left: PlanNode, right: PlanNode) -> tuple[str, ...]:
    """Shape attributes that differ (the fingerprint's keys), as `field: a -> b`."""
    out = []
    for name in SHAPE_FIELDS:
        a, b = getattr(left, name), getattr(right, name)
        if name == "scan_direction" and left.node_type != right.node_type:
            continue  # implied by the node type change
        if a != b:
            label = name.replace("qualified_", "").replace("_", " ")
            out.append(f"{label}: {a or '-'} -> {b or '-'}")
    return tuple(out)


def align(baseline: Plan, candidate: Plan) -> list[DiffRow]:
    left, right = flatten(baseline), flatten(candidate)
    n, m = len(left), len(right)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            pair = score(left[i].node, right[j].node)
            take = pair + best[i + 1][j + 1] if pair else -1
            best[i][j] = max(take, best[i + 1][j], best[i][j + 1])
    rows: list[DiffRow] = []
    i = j = 0
    while i < n or j < m:
        if i < n and j < m:
            pair = score(left[i].node, right[j].node)
            if pair and best[i][j] == pair + best[i + 1][j + 1]:
                changes = changed_fields(left[i].node, right[j].node)
                rows.append(DiffRow(left[i], right[j], "changed" if changes else "same", changes))
                i, j = i + 1, j + 1
                continue
        if i < n and (j >= m or best[i][j] == best[i + 1][j]):
            rows.append(DiffRow(left[i], None, "removed"))
            i += 1
        else:
            rows.append(DiffRow(None, right[j], "added"))
            j += 1
    return _mark_moves(rows)


def _mark_moves(rows: list[DiffRow]) -> list[DiffRow]:
    """Unmatched nodes about the same relation (or of one node type) on both sides moved:
    the order-keeping alignment could not pair them because the tree order changed (join order).
    Each is paired with the first twin of the other side, and its changes are listed."""
    removed: dict[str, list[PlanNode]] = {}
    added: dict[str, list[PlanNode]] = {}
    for row in rows:
        if row.status == "removed" and row.baseline:
            removed.setdefault(_identity(row.baseline.node), []).append(row.baseline.node)
        if row.status == "added" and row.candidate:
            added.setdefault(_identity(row.candidate.node), []).append(row.candidate.node)
    out = []
    for row in rows:
        if row.status == "removed" and row.baseline:
            twins = added.get(_identity(row.baseline.node))
            if twins:
                changes = changed_fields(row.baseline.node, twins[0])
                row = DiffRow(row.baseline, None, "moved", ("moved", *changes))
        elif row.status == "added" and row.candidate:
            twins = removed.get(_identity(row.candidate.node))
            if twins:
                changes = changed_fields(twins[0], row.candidate.node)
                row = DiffRow(None, row.candidate, "moved", ("moved", *changes))
        out.append(row)
    return out


def q_error(node: PlanNode) -> float | None:
    """max(estimate/actual, actual/estimate) per loop, with both floored at 1 row."""
    if node.actual_rows is None:
        return None
    estimate, actual = max(node.plan_rows, 1.0), max(node.actual_rows, 1.0)
    return max(estimate / actual, actual / estimate)


@dataclass(frozen=True)
class NodeTotals:
    """A node's numbers over all its loops. EXPLAIN gives rows and times per loop (averaged over
    the loops, parallel workers included) and buffers summed over them; the diff shows every
    number summed over the loops, so the columns add up the same way."""

    loops: float | None
    estimated_rows: float  # the planner's rows per loop x the loops that ran
    actual_rows: float | None
    time_ms: float | None  # inclusive of the node's children


def node_totals(node: PlanNode) -> NodeTotals:
    loops = node.actual_loops if node.actual_loops is not None else 1.0
    return NodeTotals(
        loops=node.actual_loops,
        estimated_rows=node.plan_rows * loops,
        actual_rows=node.actual_rows_total,
        time_ms=None if node.actual_total_ms is None else node.actual_total_ms * loops,
    )
