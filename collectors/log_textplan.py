"""auto_explain's text format, read back into the EXPLAIN (FORMAT JSON) structure.

Only what the model uses: node types with their strategy, join type, partial mode, relation,
schema, alias, index, scan direction, CTE and subplan names, parent relationship, costs and
rows, actual rows/loops/time, buffers, heap blocks, sort method, hash batches, workers.
The result goes through `detector.model.parse_plan`, so a text plan and a JSON plan of the
same shape have the same fingerprint (tests check this on plans of a real server).
"""

from __future__ import annotations

import re
from typing import Any

from detector.errors import PlanshiftError

_NODE = re.compile(
    r"^(?P<indent> *)(?:->  )?(?P<label>\S.*?)  \(cost=(?P<startup>[\d.]+)\.\.(?P<total>[\d.]+)"
    r" rows=(?P<rows>\d+) width=\d+\)"
    r"(?: \(actual (?:time=(?P<astart>[\d.]+)\.\.(?P<atotal>[\d.]+) )?rows=(?P<arows>[\d.]+)"
    r" loops=(?P<loops>\d+)\)| \(never executed\))?\s*$"
)
_SUBPLAN = re.compile(r"^ *((?:InitPlan|SubPlan) \d+(?: \(returns [^)]*\))?|CTE \S.*)$")
_JOIN = re.compile(
    r"^(Nested Loop|Hash|Merge)(?: (Left|Full|Right|Semi|Anti|Right Anti|Right Semi))?(?: Join)?$"
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
    r"^(?P<type>Index Scan|Index Only Scan)(?P<backward> Backward)? using (?P<index>\S+)"
    r" on (?P<target>.+)$"
)
_BITMAP_INDEX = re.compile(r"^Bitmap Index Scan on (?P<index>\S+)$")
_MEMBER_PARENTS = {"Append", "Merge Append", "BitmapAnd", "BitmapOr"}
_BUFFER_KEYS = {
    ("shared", "hit"): "Shared Hit Blocks",
    ("shared", "read"): "Shared Read Blocks",
    ("shared", "dirtied"): "Shared Dirtied Blocks",
    ("shared", "written"): "Shared Written Blocks",
    ("temp", "read"): "Temp Read Blocks",
    ("temp", "written"): "Temp Written Blocks",
}


def _unquote(name: str) -> str:
    return name[1:-1].replace('""', '"') if name.startswith('"') and name.endswith('"') else name


def _target(node: dict[str, Any], target: str, *, relation_key: str | None) -> None:
    """`schema.rel alias` (VERBOSE) or `rel alias` into Relation Name / Schema / Alias."""
    words = target.split(" ")
    name, alias = words[0], (words[1] if len(words) > 1 else None)
    schema, dot, rest = name.partition(".")
    if dot and not name.startswith('"'):
        node["Schema"], name = _unquote(schema), rest
    name = _unquote(name)
    if relation_key:
        node[relation_key] = name
    node["Alias"] = _unquote(alias) if alias else name


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
        _target(node, match["target"], relation_key="Relation Name")
        return node
    if match := _BITMAP_INDEX.match(text):
        return {**node, "Node Type": "Bitmap Index Scan", "Index Name": _unquote(match["index"])}
    if match := _SCAN_ON.match(text):
        kind = match["type"]
        node["Node Type"] = "Custom Scan" if kind.startswith("Custom Scan") else kind
        key = {"CTE Scan": "CTE Name", "WorkTable Scan": "CTE Name"}.get(kind)
        if kind in ("Subquery Scan", "Function Scan", "Values Scan", "Table Function Scan"):
            key = None
        elif key is None:
            key = "Relation Name"
        _target(node, match["target"], relation_key=key)
        return node
    if match := _JOIN.match(text):
        node["Node Type"] = "Nested Loop" if match[1] == "Nested Loop" else f"{match[1]} Join"
        node["Join Type"] = match[2] or "Inner"
        return node
    for operation in _MODIFY:
        if text.startswith(operation + " on "):
            node.update({"Node Type": "ModifyTable", "Operation": operation})
            _target(node, text[len(operation) + 4 :], relation_key="Relation Name")
            return node
    if text.startswith(("SetOp ", "HashSetOp ")):
        hashed = text.startswith("Hash")
        return {**node, "Node Type": "SetOp", "Strategy": "Hashed" if hashed else "Sorted"}
    node["Node Type"] = text
    return node


def _property(node: dict[str, Any], text: str) -> None:
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
        if space:
            node["Sort Space Type"] = space.partition(":")[0]
    elif key in ("Workers Planned", "Workers Launched") and value.isdigit():
        node[key] = int(value)
    elif key.startswith("Rows Removed by ") and value.replace(".", "").isdigit():
        node[key] = float(value)
    elif key == "Hash Buckets" and "Batches: " in value:
        batches = value.split("Batches: ")[1].split(" ")[0]
        if batches.isdigit():
            node["Hash Batches"] = int(batches)


def parse_text_plan(lines: list[str]) -> dict[str, Any]:
    """Plan lines (root first, no leading tab) -> an EXPLAIN JSON "Plan" object."""
    stack: list[tuple[int, dict[str, Any]]] = []  # (column of the node's arrow, node)
    root: dict[str, Any] | None = None
    label: tuple[int, str] | None = None
    for raw in lines:
        match = _NODE.match(raw)
        if match is None:
            if root is None:
                continue
            if sub := _SUBPLAN.match(raw):
                label = (len(raw) - len(raw.lstrip(" ")), sub[1])
            elif stack:
                _property(stack[-1][1], raw.strip())
            continue
        node = node_from_label(match["label"])
        node["Startup Cost"] = float(match["startup"])
        node["Total Cost"] = float(match["total"])
        node["Plan Rows"] = int(match["rows"])
        if match["arows"] is not None:
            node["Actual Rows"] = float(match["arows"])
            node["Actual Loops"] = float(match["loops"])
            if match["atotal"] is not None:
                node["Actual Total Time"] = float(match["atotal"])
        column = len(match["indent"])
        if root is None:
            root = node
            stack = [(-1, node)]
            continue
        while len(stack) > 1 and stack[-1][0] >= column:
            stack.pop()
        parent = stack[-1][1]
        siblings = parent.setdefault("Plans", [])
        if label is not None and label[0] < column:
            name = label[1]
            node["Parent Relationship"] = (
                "InitPlan" if name.startswith(("Init", "CTE")) else "SubPlan"
            )
            node["Subplan Name"] = name
            label = None
        else:
            node["Parent Relationship"] = _relationship(parent, siblings)
        siblings.append(node)
        stack.append((column, node))
    if root is None:
        raise PlanshiftError("no plan node in the text plan")
    return root


def _relationship(parent: dict[str, Any], siblings: list[dict[str, Any]]) -> str:
    if parent["Node Type"] in _MEMBER_PARENTS:
        return "Member"
    if parent["Node Type"] == "Subquery Scan":
        return "Subquery"
    plain = [s for s in siblings if s.get("Parent Relationship") in ("Outer", "Inner")]
    return "Outer" if not plain else "Inner"
