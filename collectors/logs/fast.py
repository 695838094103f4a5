"""The fast path of an auto_explain JSON entry: one typed msgspec decode instead of dicts.

A JSON plan carries ~30 keys per node; a row needs a dozen of the root's and the shape fields of
every node. `msgspec` decodes just those, in C, into `EntryDoc`: the query fields, the root's
shape fields and numbers, and its children as frozen, hashable `ShapeNode`s. `shape_key` (the
root's shape fields and children) keys the fingerprint cache. The structs are not tracked by
the garbage collector (decoded values hold no cycles): a tenth faster. An entry that does not
fit these types (a string where a number belongs, broken JSON) gives None, and the caller takes
the general path (`log_plans.read_entry`), which reports it precisely.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import Raw, Struct, field
from msgspec.structs import astuple


class ShapeNode(Struct, frozen=True, gc=False):
    """The fields `detector.model` fingerprints (log_rows._SHAPE_FIELDS), children in order."""

    node_type: str | None = field(name="Node Type", default=None)
    strategy: str | None = field(name="Strategy", default=None)
    partial_mode: str | None = field(name="Partial Mode", default=None)
    join_type: str | None = field(name="Join Type", default=None)
    parent: str | None = field(name="Parent Relationship", default=None)
    direction: str | None = field(name="Scan Direction", default=None)
    relation: str | None = field(name="Relation Name", default=None)
    schema: str | None = field(name="Schema", default=None)
    index: str | None = field(name="Index Name", default=None)
    cte: str | None = field(name="CTE Name", default=None)
    subplan: str | None = field(name="Subplan Name", default=None)
    plans: tuple[ShapeNode, ...] = field(name="Plans", default=())


class RootNode(ShapeNode, frozen=True, gc=False):
    """The root node: ShapeNode's fields first, then the numbers of the row."""

    total_cost: float = field(name="Total Cost", default=0.0)
    startup_cost: float = field(name="Startup Cost", default=0.0)
    plan_rows: float = field(name="Plan Rows", default=0.0)
    actual_rows: float | None = field(name="Actual Rows", default=None)
    actual_loops: float | None = field(name="Actual Loops", default=None)
    shared_hit: int = field(name="Shared Hit Blocks", default=0)
    shared_read: int = field(name="Shared Read Blocks", default=0)
    shared_dirtied: int = field(name="Shared Dirtied Blocks", default=0)
    shared_written: int = field(name="Shared Written Blocks", default=0)
    temp_read: int = field(name="Temp Read Blocks", default=0)
    temp_written: int = field(name="Temp Written Blocks", default=0)
    io_read: float | None = field(
        name="Shared I/O Read Time", default=None
    )  # 17+ (16 still writes "I/O Read Time")
    io_read_old: float | None = field(name="I/O Read Time", default=None)  # <= 16


_SHAPE_WIDTH = len(ShapeNode.__struct_fields__)  # RootNode's first fields


class EntryDoc(Struct, kw_only=True, gc=False):
    query_text: str = field(name="Query Text", default="")
    parameters: str | None = field(name="Query Parameters", default=None)
    queryid: int | None = field(name="Query Identifier", default=None)
    execution_ms: float | None = field(name="Execution Time", default=None)
    planning_ms: float | None = field(name="Planning Time", default=None)
    settings: Raw = field(name="Settings", default=Raw())  # empty: none logged
    plan: RootNode = field(name="Plan")


class HeapNode(Struct, gc=False):
    exact: int | None = field(name="Exact Heap Blocks", default=None)
    lossy: int | None = field(name="Lossy Heap Blocks", default=None)
    plans: list[HeapNode] = field(name="Plans", default_factory=list)


class HeapDoc(Struct, gc=False):
    plan: HeapNode = field(name="Plan")


_ENTRIES = msgspec.json.Decoder(EntryDoc)
_HEAPS = msgspec.json.Decoder(HeapDoc)
_FAILED = (msgspec.DecodeError, msgspec.ValidationError)


def decode(body: bytes | str) -> EntryDoc | None:
    """The entry's query and plan fields; None when it needs the general path."""
    try:
        return _ENTRIES.decode(body)
    except _FAILED:
        return None


def shape_key(root: RootNode) -> tuple[Any, ...]:
    """The plan's shape: the root's shape fields and its children, hashable."""
    return astuple(root)[:_SHAPE_WIDTH]


def has_bitmap_heap_scan(node: ShapeNode) -> bool:
    """Only Bitmap Heap Scan nodes report Exact/Lossy Heap Blocks."""
    return node.node_type == "Bitmap Heap Scan" or any(map(has_bitmap_heap_scan, node.plans))


def heap_blocks(body: bytes | str) -> tuple[int | None, int | None] | None:
    """Exact and lossy heap blocks summed over the plan (None each when no node has them);
    None when the entry needs the general path."""
    try:
        nodes = [_HEAPS.decode(body).plan]
    except _FAILED:
        return None
    exact = lossy = None
    while nodes:
        node = nodes.pop()
        if node.exact is not None:
            exact = (exact or 0) + node.exact
        if node.lossy is not None:
            lossy = (lossy or 0) + node.lossy
        nodes.extend(node.plans)
    return exact, lossy


def numbers(doc: EntryDoc) -> tuple[Any, ...]:
    """total, startup, plan rows, actual rows x loops, execution, planning, 6 buffers, io read."""
    root = doc.plan
    actual = root.actual_rows
    if actual is not None and root.actual_loops:
        actual *= root.actual_loops
    io_read = root.io_read if root.io_read is not None else root.io_read_old
    return (
        root.total_cost,
        root.startup_cost,
        root.plan_rows,
        actual,
        doc.execution_ms,
        doc.planning_ms,
        root.shared_hit,
        root.shared_read,
        root.shared_dirtied,
        root.shared_written,
        root.temp_read,
        root.temp_written,
        io_read,
    )
