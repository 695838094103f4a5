"""auto_explain's text format, read back into the EXPLAIN (FORMAT JSON) structure.

Only what the model and the reports use: node types with their strategy, join type, partial
mode, relation, schema, alias, function and index names, scan direction, CTE and subplan
names, parent relationship, costs and rows, actual rows/loops/time, buffers, heap blocks,
sort method and space, hash buckets and batches, workers, rows removed, Disabled (18).
The result goes through `detector.model.parse_plan`, so a text plan and a JSON plan of the
same shape have the same fingerprint (tests/test_textplan.py checks this on 15, 17 and 18).

Layout: a node's arrow `->  ` at column c puts its properties and its children's arrows at
c + 6 (the root's at 2); an `InitPlan 1` / `SubPlan 1` / `CTE x` label sits at the children's
column of the node that owns it. Text leaves out what JSON shows as zero or unchanged (rows
removed, lossy heap blocks, original hash buckets): those are filled in as JSON has them.
"""

from __future__ import annotations

import re
from typing import Any

from detector.errors import PlanshiftError

_NODE = re.compile(
    r"^(?P<indent> *)(?:->  )?(?P<label>\S.*?)  \(cost=(?P<startup>[\d.]+)\.\.(?P<total>[\d.]+)"
    r" rows=(?P<rows>\d+) width=\d+\)"
    r"(?: \(actual (?:time=(?P<astart>[\d.]+)\.\.(?P<atotal>[\d.]+) )?rows=(?P<arows>[\d.]+)"
    r" loops=(?P<loops>\d+)\)|(?P<never> \(never executed\)))?\s*$"
)
_SUBPLAN = re.compile(r"^ *((?:InitPlan|SubPlan) \d+(?: \(returns [^)]*\))?|CTE \S.*)$")
_LABELS: dict[str, dict[str, Any]] = {}  # node_from_label per distinct label: labels repeat
_LABELS_LIMIT = 50_000  # of _LABELS and _PROPERTIES each
_SUBPLAN_STARTS = frozenset(("Ini", "Sub", "CTE"))  # what _SUBPLAN can match, cheaply
_MEMBER_PARENTS = {"Append", "Merge Append", "BitmapAnd", "BitmapOr"}
_ZERO_UNLESS_SHOWN = (  # (property line seen, node types or None for any, JSON key shown as 0)
    ("Filter", None, "Rows Removed by Filter"),
    ("Join Filter", None, "Rows Removed by Join Filter"),
    ("Recheck Cond", ("Bitmap Heap Scan",), "Rows Removed by Index Recheck"),
    ("Index Cond", ("Index Scan", "Index Only Scan"), "Rows Removed by Index Recheck"),
)

_PART = r'(?:"(?:[^"]|"")*"|[^\s."]+)'
_TARGET = re.compile(rf"^(?P<first>{_PART})(?:\.(?P<second>{_PART}))?(?: (?P<alias>{_PART}))?$")
_JOIN = re.compile(
    r"^(?:Nested Loop|(Nested Loop|Hash|Merge)"
    r"(?: (Left|Full|Right|Semi|Anti|Right Anti|Right Semi))? Join)$"
)
_AGGREGATES = {
    "Aggregate": "Plain",
    "GroupAggregate": "Sorted",
    "HashAggregate": "Hashed",
    "MixedAggregate": "Mixed",
}
_MODIFY = ("Insert", "Update", "Delete", "Merge")
_SCAN_ON = re.compile(
    r"^(?P<type>Seq Scan|Bitmap Heap Scan|Tid Scan|Tid Range Scan|Sample Scan|Foreign Scan"
    r"|CTE Scan|Subquery Scan|Function Scan|Values Scan|WorkTable Scan|Named Tuplestore Scan"
    r"|Table Function Scan|Custom Scan(?: \(\w+\))?) on (?P<target>.+)$"
)
_INDEX_SCAN = re.compile(
    rf"^(?P<type>Index Scan|Index Only Scan)(?P<backward> Backward)? using (?P<index>{_PART})"
    r" on (?P<target>.+)$"
)
_BITMAP_INDEX = re.compile(rf"^Bitmap Index Scan on (?P<index>{_PART})$")
_NAME_KEYS = {  # scan -> the JSON key of the object named before the alias (None: only an alias)
    "CTE Scan": "CTE Name",
    "WorkTable Scan": "CTE Name",
    "Named Tuplestore Scan": "Tuplestore Name",
    "Function Scan": "Function Name",
    "Table Function Scan": "Table Function Name",
    "Subquery Scan": None,
    "Values Scan": None,
}
_HASH = re.compile(
    r"^(?P<buckets>\d+)(?: \(originally (?P<obuckets>\d+)\))?"
    r"  Batches: (?P<batches>\d+)(?: \(originally (?P<obatches>\d+)\))?"
    r"  Memory Usage: (?P<memory>\d+)kB$"
)
_BUFFER_KEYS = {
    ("shared", "hit"): "Shared Hit Blocks",
    ("shared", "read"): "Shared Read Blocks",
    ("shared", "dirtied"): "Shared Dirtied Blocks",
    ("shared", "written"): "Shared Written Blocks",
    ("local", "hit"): "Local Hit Blocks",
    ("local", "read"): "Local Read Blocks",
    ("local", "dirtied"): "Local Dirtied Blocks",
    ("local", "written"): "Local Written Blocks",
    ("temp", "read"): "Temp Read Blocks",
    ("temp", "written"): "Temp Written Blocks",
}
_EXPRESSIONS = frozenset(  # kept as JSON has them: they show a generic plan's `$1`
    [
        "Index Cond",
        "Recheck Cond",
        "Filter",
        "Join Filter",
        "Hash Cond",
        "Merge Cond",
        "One-Time Filter",
        "TID Cond",
        "Order By",
        "Run Condition",
        "Cache Key",
    ]
)
_COUNTS = frozenset(
    ("Workers Planned", "Workers Launched", "Heap Fetches", "Index Searches", "Subplans Removed")
)


def _unquote(name: str) -> str:
    return name[1:-1].replace('""', '"') if name.startswith('"') and name.endswith('"') else name


def _target(node: dict[str, Any], target: str, name_key: str | None) -> None:
    """`schema.name alias`, `name alias`, `name` or (name_key None) `alias` into JSON keys."""
    match = _TARGET.match(target)
    if match is None:
        node["Alias"] = target
        return
    schema, name = (match["first"], match["second"]) if match["second"] else (None, match["first"])
    if name_key is None:
        node["Alias"] = _unquote(name)
        return
    if schema is not None:
        node["Schema"] = _unquote(schema)
    node[name_key] = _unquote(name)
    node["Alias"] = _unquote(match["alias"] or name)


def node_from_label(label: str) -> dict[str, Any]:
    """`Index Scan Backward using t_pkey on public.t t1` -> the JSON keys of that node."""
    node: dict[str, Any] = {}
    text = label
    if text.startswith("Parallel "):
        node["Parallel Aware"] = True
        text = text[len("Parallel ") :]
    for mode in ("Partial", "Finalize"):
        if text.startswith(mode + " ") and text.split(" ", 1)[1] in _AGGREGATES:
            node["Partial Mode"] = mode
            text = text.split(" ", 1)[1]
    if text in _AGGREGATES:
        node.update({"Node Type": "Aggregate", "Strategy": _AGGREGATES[text]})
        node.setdefault("Partial Mode", "Simple")
        return node
    if match := _INDEX_SCAN.match(text):
        node["Node Type"] = match["type"]
        node["Scan Direction"] = "Backward" if match["backward"] else "Forward"
        node["Index Name"] = _unquote(match["index"])
        _target(node, match["target"], "Relation Name")
        return node
    if match := _BITMAP_INDEX.match(text):
        return {**node, "Node Type": "Bitmap Index Scan", "Index Name": _unquote(match["index"])}
    if match := _SCAN_ON.match(text):
        kind = match["type"]
        node["Node Type"] = "Custom Scan" if kind.startswith("Custom Scan") else kind
        if kind == "Foreign Scan":
            node["Operation"] = "Select"
        _target(node, match["target"], _NAME_KEYS.get(kind, "Relation Name"))
        return node
    if match := _JOIN.match(text):
        kind = match[1] or "Nested Loop"
        node["Node Type"] = kind if kind == "Nested Loop" else f"{kind} Join"
        node["Join Type"] = match[2] or "Inner"
        return node
    if text.startswith("Foreign ") and (operation := text.split(" ", 2)[1]) in _MODIFY:
        node.update({"Node Type": "Foreign Scan", "Operation": operation})
        _target(node, text.split(" on ", 1)[-1], "Relation Name")
        return node
    for operation in _MODIFY:
        if text.startswith(operation + " on "):
            node.update({"Node Type": "ModifyTable", "Operation": operation})
            _target(node, text[len(operation) + 4 :], "Relation Name")
            return node
    if text.startswith(("SetOp ", "HashSetOp ")):
        hashed = text.startswith("Hash")
        return {**node, "Node Type": "SetOp", "Strategy": "Hashed" if hashed else "Sorted"}
    node["Node Type"] = text
    return node


def node_property(node: dict[str, Any], text: str) -> str:
    """One `Key: value` line of a node into its JSON keys; the line's key."""
    key, _, value = text.partition(": ")
    if key == "Buffers":
        for group in value.split(", "):
            words = group.split(" ")
            for pair in words[1:]:
                name, _, number = pair.partition("=")
                json_key = _BUFFER_KEYS.get((words[0], name))
                if json_key and number.isdigit():
                    node[json_key] = int(number)
    elif key == "Heap Blocks":
        for pair in value.split(" "):
            name, _, number = pair.partition("=")
            if name in ("exact", "lossy") and number.isdigit():
                node[f"{name.title()} Heap Blocks"] = int(number)
    elif key == "Sort Method":
        method, _, space = value.partition("  ")
        node["Sort Method"] = method
        space_type, _, used = space.partition(": ")
        if space_type:
            node["Sort Space Type"] = space_type
        if used.endswith("kB") and used[:-2].isdigit():
            node["Sort Space Used"] = int(used[:-2])
    elif key == "Buckets" and (match := _HASH.match(value)):
        node["Hash Buckets"] = int(match["buckets"])
        node["Original Hash Buckets"] = int(match["obuckets"] or match["buckets"])
        node["Hash Batches"] = int(match["batches"])
        node["Original Hash Batches"] = int(match["obatches"] or match["batches"])
        node["Peak Memory Usage"] = int(match["memory"])
    elif key == "Batches" and node.get("Node Type") == "Aggregate":
        batches = value.split(" ")[0]
        if batches.isdigit():
            node["HashAgg Batches"] = int(batches)
    elif key in _EXPRESSIONS:
        node[key] = value
    elif key in _COUNTS and value.isdigit():
        node[key] = int(value)
    elif key == "Disabled":
        node["Disabled"] = value == "true"
    elif key.startswith("Rows Removed by ") and value.replace(".", "", 1).isdigit():
        node[key] = float(value)
    return key


_PROPERTIES: dict[str, tuple[str, dict[str, Any]]] = {}  # line -> its key and JSON keys


def _property(node: dict[str, Any], text: str) -> str:
    """`node_property` once per distinct line (a line's JSON keys depend on it alone, but for
    an aggregate's `Batches`)."""
    if text.startswith("Batches: "):
        return node_property(node, text)
    known = _PROPERTIES.get(text)
    if known is None:
        if len(_PROPERTIES) > _LABELS_LIMIT:
            _PROPERTIES.clear()
        found: dict[str, Any] = {}
        known = _PROPERTIES[text] = (node_property(found, text), found)
    node.update(known[1])
    return known[0]


class _Node:
    """A node being read: its JSON object, arrow column and the property keys seen."""

    __slots__ = ("column", "json", "seen")

    def __init__(self, json: dict[str, Any], column: int) -> None:
        self.json = json
        self.column = column
        self.seen: set[str] = set()

    @property
    def inner_column(self) -> int:
        """Where this node's properties, children and subplan labels start."""
        return 2 if self.column < 0 else self.column + 6


def _node(match: re.Match[str]) -> dict[str, Any]:
    label = match["label"]
    known = _LABELS.get(label)
    if known is None:
        if len(_LABELS) > _LABELS_LIMIT:
            _LABELS.clear()
        known = _LABELS[label] = node_from_label(label)
    node = dict(known)
    node["Startup Cost"] = float(match["startup"])
    node["Total Cost"] = float(match["total"])
    node["Plan Rows"] = int(match["rows"])
    if match["arows"] is not None:
        node["Actual Rows"] = float(match["arows"])
        node["Actual Loops"] = float(match["loops"])
        if match["atotal"] is not None:
            node["Actual Startup Time"] = float(match["astart"])
            node["Actual Total Time"] = float(match["atotal"])
    elif match["never"]:
        node["Actual Rows"] = 0.0
        node["Actual Loops"] = 0.0
    return node


def parse_text_plan(lines: list[str]) -> dict[str, Any]:
    """Plan lines (root first, no leading tab) -> an EXPLAIN JSON "Plan" object."""
    stack: list[_Node] = []
    done: list[_Node] = []
    label: str | None = None
    for raw in lines:
        match = _NODE.match(raw) if "  (cost=" in raw else None
        indent = len(raw) - len(raw.lstrip(" "))
        if match is None:
            if not stack:
                continue
            if raw[indent : indent + 3] in _SUBPLAN_STARTS and (sub := _SUBPLAN.match(raw)):
                while len(stack) > 1 and stack[-1].column >= indent:
                    stack.pop()
                label = sub[1]
            elif indent <= stack[-1].inner_column:  # deeper: a worker's own lines
                stack[-1].seen.add(_property(stack[-1].json, raw.strip()))
            continue
        node = _Node(_node(match), len(match["indent"]))
        done.append(node)
        if not stack:
            stack = [_Node(node.json, -1)]
            done[-1] = stack[0]
            continue
        while len(stack) > 1 and stack[-1].column >= node.column:
            stack.pop()
        parent = stack[-1].json
        siblings = parent.setdefault("Plans", [])
        if label is not None:
            node.json["Parent Relationship"] = (
                "InitPlan" if label.startswith(("Init", "CTE")) else "SubPlan"
            )
            node.json["Subplan Name"] = label
            label = None
        else:
            node.json["Parent Relationship"] = _relationship(parent, siblings)
        siblings.append(node.json)
        stack.append(node)
    if not stack:
        raise PlanshiftError("no plan node in the text plan")
    for node in done:
        _fill_defaults(node)
    return stack[0].json


def _relationship(parent: dict[str, Any], siblings: list[dict[str, Any]]) -> str:
    if parent["Node Type"] in _MEMBER_PARENTS:
        return "Member"
    if parent["Node Type"] == "Subquery Scan":
        return "Subquery"
    plain = [s for s in siblings if s.get("Parent Relationship") in ("Outer", "Inner")]
    return "Outer" if not plain else "Inner"


def _fill_defaults(node: _Node) -> None:
    """What JSON shows and text leaves out because it is zero."""
    plan = node.json
    node_type = plan["Node Type"]
    if node_type in ("Append", "Merge Append"):
        plan.setdefault("Subplans Removed", 0)
    if "Actual Loops" not in plan:
        return
    for seen, types, key in _ZERO_UNLESS_SHOWN:
        if seen in node.seen and (types is None or node_type in types):
            plan.setdefault(key, 0.0)
    if node_type == "Bitmap Heap Scan":
        plan.setdefault("Exact Heap Blocks", 0)
        plan.setdefault("Lossy Heap Blocks", 0)
