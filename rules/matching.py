"""Matching plan nodes across two plans by what they read, never by their position.

Two plans of one query rarely line up node for node: a flip adds a Sort, a Gather or a
Hash, swaps a join's sides or moves a scan under another parent. Rules therefore key nodes
by the relations beneath them: a join by the set of relations it joins, a Sort, Aggregate,
Memoize or Hash by the relations it consumes, a scan by its relation. Self-joins stay apart
because a relation read under another alias is another leaf (`sbtest2 t3`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from detector.model import Plan, PlanNode, ScanAccess, scan_accesses
from detector.model.fingerprint import node_label

T = TypeVar("T")

JOIN_NODES = ("Nested Loop", "Hash Join", "Merge Join")
GATHER_NODES = ("Gather", "Gather Merge")
SUBPLAN_LINKS = ("InitPlan", "SubPlan")

RelationKey = tuple[str, ...]


# --- per-plan memo -------------------------------------------------------------------------
# compare parses each distinct plan once and shares the Plan object between queries and
# sides, so what rules derive from a plan (node lists, relation keys, q-errors) is computed
# once per Plan object. Plans are unhashable (settings is a dict): keyed by id, guarded by a
# weak reference that drops the entry when the plan goes.
_MEMO: dict[int, tuple[weakref.ref[Plan], dict[Any, Any]]] = {}


def memo(plan: Plan, compute: Callable[..., T], *args: Any) -> T:
    """`compute(plan, *args)` once per (plan object, compute, args)."""
    entry = _MEMO.get(id(plan))
    if entry is None or entry[0]() is not plan:
        entry = (weakref.ref(plan, _forget(id(plan))), {})
        _MEMO[id(plan)] = entry
    key = (compute, *args) if args else compute
    values = entry[1]
    if key not in values:
        values[key] = compute(plan, *args)
    result: T = values[key]
    return result


def _forget(ident: int) -> Callable[[weakref.ref[Plan]], None]:
    def forget(_ref: weakref.ref[Plan]) -> None:
        _MEMO.pop(ident, None)

    return forget


def plan_nodes(plan: Plan) -> list[tuple[str, PlanNode]]:
    """(path, node) depth-first, as `Plan.nodes()`, computed once per plan."""
    return memo(plan, _nodes)


def _nodes(plan: Plan) -> list[tuple[str, PlanNode]]:
    return list(plan.nodes())


def nodes_of_type(plan: Plan, *node_types: str) -> list[PlanNode]:
    by_type = memo(plan, _by_type)
    return [node for node_type in node_types for node in by_type.get(node_type, [])]


def _by_type(plan: Plan) -> dict[str, list[PlanNode]]:
    found: dict[str, list[PlanNode]] = {}
    for _, node in plan_nodes(plan):
        found.setdefault(node.node_type, []).append(node)
    return found


@dataclass(frozen=True)
class PlanFacts:
    """What the plan-wide rules test first on every query, computed once per plan."""

    sort_spilled: bool  # a Sort on disk
    hash_batched: bool  # a Hash with more than one batch
    lossy_bitmap: bool  # a Bitmap Heap Scan with lossy blocks
    max_heap_fetches: int  # the most heap fetches of an Index Only Scan
    workers_short: bool  # a Gather that launched fewer workers than planned
    shared_blocks: int  # buffers of the root (EXPLAIN sums children into parents)
    temp_blocks: int


def facts(plan: Plan) -> PlanFacts:
    return memo(plan, _facts)


def _facts(plan: Plan) -> PlanFacts:
    sort_spilled = hash_batched = lossy = short = False
    heap_fetches = 0
    for _, node in plan_nodes(plan):
        kind = node.node_type
        if kind == "Sort":
            method = node.sort_method or ""
            sort_spilled |= node.sort_space_type == "Disk" or method.startswith("external")
        elif kind == "Hash":
            hash_batched |= (node.hash_batches or 0) > 1
        elif kind == "Bitmap Heap Scan":
            lossy |= (node.lossy_heap_blocks or 0) > 0
        elif kind == "Index Only Scan":
            heap_fetches = max(heap_fetches, node.heap_fetches or 0)
        elif kind in GATHER_NODES:
            planned, launched = node.workers_planned, node.workers_launched
            short |= planned is not None and launched is not None and launched < planned
    buffers = plan.buffers_total()
    return PlanFacts(
        sort_spilled,
        hash_batched,
        lossy,
        heap_fetches,
        short,
        buffers.shared_total,
        buffers.temp_read + buffers.temp_written,
    )


def accesses(plan: Plan) -> list[ScanAccess]:
    """`scan_accesses(plan)`, computed once per plan."""
    return memo(plan, scan_accesses)


def leaf_name(node: PlanNode) -> str | None:
    """How a relation-reading node is named in a key: `sbtest1`, `sbtest2 t3`, `cte w`."""
    if node.relation is not None:
        name = node.qualified_relation or node.relation
        if node.alias and node.alias != node.relation:
            name += f" {node.alias}"
        return name
    if node.cte_name is not None:
        return f"cte {node.cte_name}"
    if node.node_type in ("Function Scan", "Values Scan", "Subquery Scan") and node.alias:
        return node.alias
    return None


def main_children(node: PlanNode) -> tuple[PlanNode, ...]:
    """Children that feed the node's rows: InitPlans and SubPlans are left out."""
    return tuple(c for c in node.children if c.parent_relationship not in SUBPLAN_LINKS)


def relations_under(node: PlanNode) -> RelationKey:
    """Sorted leaf names beneath (and including) `node`, not counting InitPlans/SubPlans."""
    names: list[str] = []
    stack = [node]
    while stack:
        current = stack.pop()
        children = main_children(current)
        name = leaf_name(current)
        # a subquery counts by what it reads: PostgreSQL drops trivial Subquery Scans
        if name is not None and not (current.node_type == "Subquery Scan" and children):
            names.append(name)
        stack.extend(children)
    return tuple(sorted(names))


def key_text(key: RelationKey) -> str:
    """`sbtest1` for one relation, `sbtest1 x sbtest2` for several."""
    return " x ".join(key) if key else "(no relation)"


def parallel_relations(plan: Plan) -> dict[str, PlanNode]:
    """Relation -> the Gather / Gather Merge it is read under (the first found)."""
    return memo(plan, _parallel_relations)


def _parallel_relations(plan: Plan) -> dict[str, PlanNode]:
    found: dict[str, PlanNode] = {}
    keys = relation_keys(plan)
    for node in nodes_of_type(plan, *GATHER_NODES):
        for name in keys[id(node)]:
            found.setdefault(name, node)
    return found


def relation_keys(plan: Plan) -> dict[int, RelationKey]:
    """id(node) -> relations_under(node) for every node of the plan, computed once."""
    return memo(plan, _relation_keys)


def _relation_keys(plan: Plan) -> dict[int, RelationKey]:
    keys: dict[int, RelationKey] = {}

    def visit(node: PlanNode) -> RelationKey:
        names: list[str] = []
        children = main_children(node)
        for child in node.children:
            below = visit(child)
            if child.parent_relationship not in SUBPLAN_LINKS:
                names.extend(below)
        name = leaf_name(node)
        if name is not None and not (node.node_type == "Subquery Scan" and children):
            names.append(name)
        key = tuple(sorted(names))
        keys[id(node)] = key
        return key

    visit(plan.root)
    return keys


def keyed(plan: Plan, keep: Callable[[PlanNode], bool]) -> dict[RelationKey, list[PlanNode]]:
    """Nodes that pass `keep`, grouped by the relations beneath them (plan order kept)."""
    keys = relation_keys(plan)
    groups: dict[RelationKey, list[PlanNode]] = {}
    for _, node in plan_nodes(plan):
        if keep(node):
            groups.setdefault(keys[id(node)], []).append(node)
    return groups


def parents(plan: Plan) -> dict[str, tuple[str, PlanNode]]:
    """Path of a node -> (path, node) of its parent."""
    found: dict[str, tuple[str, PlanNode]] = {}
    for path, node in plan_nodes(plan):
        for i, _ in enumerate(node.children):
            found[f"{path}.{i}"] = (path, node)
    return found


def own_temp_blocks(node: PlanNode) -> int:
    """Temp blocks read + written by this node itself (EXPLAIN sums children into parents)."""
    total = node.buffers.temp_read + node.buffers.temp_written
    below = sum(c.buffers.temp_read + c.buffers.temp_written for c in node.children)
    return max(total - below, 0)


# --- joins --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Join:
    """One join node: its method, and the relations on its outer and inner side."""

    path: str
    node: PlanNode
    outer: RelationKey
    inner: RelationKey

    @property
    def method(self) -> str:
        return self.node.node_type

    @property
    def relations(self) -> RelationKey:
        return tuple(sorted(self.outer + self.inner))

    @property
    def label(self) -> str:
        return node_label(self.node)


def joins(plan: Plan) -> list[Join]:
    """Every Nested Loop, Hash Join and Merge Join with the relations on each side."""
    return memo(plan, _joins)


def _joins(plan: Plan) -> list[Join]:
    keys = relation_keys(plan)
    found: list[Join] = []
    for path, node in plan_nodes(plan):
        if node.node_type not in JOIN_NODES:
            continue
        sides = main_children(node)
        if len(sides) != 2:
            continue
        found.append(Join(path, node, keys[id(sides[0])], keys[id(sides[1])]))
    return found


def join_tree(node: PlanNode) -> str:
    """The join order as nested pairs, outer first: `((sbtest2 x sbtest1) x sbtest3)`."""
    if node.node_type in JOIN_NODES:
        sides = main_children(node)
        if len(sides) == 2:
            return f"({join_tree(sides[0])} x {join_tree(sides[1])})"
    children = main_children(node)
    name = leaf_name(node)
    if name is not None and not (node.node_type == "Subquery Scan" and children):
        return name
    if len(children) == 1:
        return join_tree(children[0])
    if not children:
        return node_label(node)
    return "[" + ", ".join(join_tree(c) for c in children) + "]"


def top_joins(plan: Plan) -> list[PlanNode]:
    """Join nodes with no join above them in the same (sub)plan: the roots of join trees."""
    roots: list[PlanNode] = []

    def visit(node: PlanNode, under_join: bool) -> None:
        is_join = node.node_type in JOIN_NODES
        if is_join and not under_join:
            roots.append(node)
        for child in node.children:
            subplan = child.parent_relationship in SUBPLAN_LINKS
            visit(child, (under_join or is_join) and not subplan)

    visit(plan.root, False)
    return roots


# --- parallelism --------------------------------------------------------------------------


def parallel_divisor(workers: int) -> float:
    """PostgreSQL's per-worker row divisor (get_parallel_divisor, leader participating)."""
    divisor = float(workers)
    leader = 1.0 - 0.3 * workers
    if leader > 0:
        divisor += leader
    return max(divisor, 1.0)


@dataclass(frozen=True)
class Placed:
    """A node with what its ancestors imply: the Gather it runs under, early stops above it."""

    path: str
    node: PlanNode
    gather: PlanNode | None
    early_stop: bool


def placed_nodes(plan: Plan) -> list[Placed]:
    """Every node with its enclosing Gather (parallel part) and whether a parent may stop it
    early (a Limit, either side of a Merge Join, the inner side of a semi/anti join, an
    EXISTS-style SubPlan), which makes fewer actual rows than estimated meaningless."""
    return memo(plan, _placed_list)


def _placed_list(plan: Plan) -> list[Placed]:
    return list(_placed(plan))


def _placed(plan: Plan) -> Iterator[Placed]:

    def visit(path: str, node: PlanNode, gather: PlanNode | None, early: bool) -> Iterator[Placed]:
        yield Placed(path, node, gather, early)
        inner_gather = node if node.node_type in GATHER_NODES else gather
        for i, child in enumerate(node.children):
            stops = early or node.node_type == "Limit" or node.node_type == "Merge Join"
            if node.join_type in ("Semi", "Anti") and child.parent_relationship == "Inner":
                stops = True
            if child.parent_relationship in SUBPLAN_LINKS:
                stops = child.parent_relationship == "SubPlan"
                yield from visit(f"{path}.{i}", child, None, stops)
                continue
            yield from visit(f"{path}.{i}", child, inner_gather, stops)

    yield from visit("0", plan.root, None, False)
