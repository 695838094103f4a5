"""The HTML report's plan pieces on the captured plans (tests/fixtures/plans/pg15, 17, 18): the
EXPLAIN JSON behind the copy and download controls reads back into the same plan, signatures
read back into their plan trees for the census diagram, per-node numbers are summed over
loops the same way in every column, and each node carries EXPLAIN's conditions and counters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from detector.model import Plan, parse_plan
from detector.model.fingerprint import fingerprint, node_label, signature
from detector.reports.comparison.html_plan_diagram import ShapeTree, parse_signature
from detector.reports.comparison.html_plan_json import explain_json
from detector.reports.comparison.plan_diff import node_totals, q_error

PLANS = sorted((Path(__file__).resolve().parent / "fixtures" / "plans").glob("pg1*/*.json"))


def _plan(path: Path) -> Plan:
    return parse_plan(json.loads(path.read_text())["explain"])


@pytest.mark.parametrize("path", PLANS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_json_reads_back_into_the_same_plan(path: Path) -> None:
    plan = _plan(path)
    again = parse_plan(explain_json(plan))
    assert again.root == plan.root
    assert fingerprint(again) == fingerprint(plan)
    assert (again.planning_ms, again.execution_ms) == (plan.planning_ms, plan.execution_ms)
    assert dict(again.settings) == dict(plan.settings)


def _labels(plan: Plan) -> list[str]:
    """Pre-order node labels as the signature prints them (a subplan with its name)."""
    return [
        f"{node.subplan_name}: {node_label(node)}" if node.subplan_name else node_label(node)
        for _, node in plan.nodes()
    ]


@pytest.mark.parametrize("path", PLANS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_signature_reads_back_into_its_plan_tree(path: Path) -> None:
    plan = _plan(path)
    tree = parse_signature(signature(plan))
    assert [node.label for _, node in tree.rows()] == _labels(plan)
    depths = [path.count(".") for path, _ in plan.nodes()]
    assert [depth for depth, _ in tree.rows()] == depths


@pytest.mark.parametrize(
    "text",
    [
        "",
        "}",
        "{",
        "a > ",
        "a {b; c}}",
        "IndexScan(we)ird t > x",
        "a {b > c; d {e; f}} > g",
        "x; y",
    ],
)
def test_any_signature_gives_a_tree(text: str) -> None:
    tree = parse_signature(text)
    assert isinstance(tree, ShapeTree) and tree.size() >= 1


def test_names_with_separators_stay_in_their_node() -> None:
    tree = parse_signature("NestedLoop {IndexScan(a > b; c {d} a_idx); SeqScan(t)}")
    assert [node.label for _, node in tree.rows()] == [
        "NestedLoop",
        "IndexScan(a > b; c {d} a_idx)",
        "SeqScan(t)",
    ]


def test_node_numbers_are_totals_over_loops() -> None:
    plan = _plan(PLANS[0].parent.parent / "pg17" / "join_nested_loop.json")
    looped = [node for _, node in plan.nodes() if (node.actual_loops or 0) > 1]
    assert looped, "the nested loop's inner side runs once per outer row"
    for node in looped:
        totals = node_totals(node)
        loops = node.actual_loops or 0
        assert totals.loops == loops
        assert totals.actual_rows == pytest.approx((node.actual_rows or 0) * loops)
        assert totals.estimated_rows == pytest.approx(node.plan_rows * loops)
        if node.actual_total_ms is not None:
            assert totals.time_ms == pytest.approx(node.actual_total_ms * loops)
        # the q-error is the same per loop and in total: both sides of it were multiplied
        if (node.actual_rows or 0) >= 1 and node.plan_rows >= 1 and totals.actual_rows:
            ratio = totals.estimated_rows / totals.actual_rows
            assert q_error(node) == pytest.approx(max(ratio, 1 / ratio))


def test_a_plan_read_from_text_offers_postgresql_s_own_json() -> None:
    path = next(p for p in PLANS if p.stem == "range_bitmap_scan")
    document = json.loads(path.read_text())["explain"]
    from_text = parse_plan(json.dumps(document))
    offered = json.loads(explain_json(from_text))
    assert offered == document  # conditions and all, as PostgreSQL wrote them
    assert "Recheck Cond" in json.dumps(offered)
    assert "Recheck Cond" not in explain_json(_plan(path))  # parsed document: rebuilt


def _from_text(name: str, version: str = "pg17") -> Plan:
    """A captured plan read from its JSON text, as the store and logs give plans (with source)."""
    path = PLANS[0].parent.parent / version / f"{name}.json"
    return parse_plan(json.dumps(json.loads(path.read_text())["explain"]))


def _raw_nodes(name: str, version: str = "pg17") -> list[dict[str, object]]:
    path = PLANS[0].parent.parent / version / f"{name}.json"
    document = json.loads(path.read_text())["explain"]
    out, stack = [], [document[0]["Plan"]]
    while stack:  # pre-order, as Plan.nodes() walks
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(node.get("Plans", [])))
    return out


@pytest.mark.parametrize("path", PLANS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_node_details_are_explain_s_conditions_node_by_node(path: Path) -> None:
    """Every condition EXPLAIN printed is on its node, as EXPLAIN wrote it, in EXPLAIN's order."""
    from detector.model.plan_details import CONDITION_KEYS, node_details

    plan = _from_text(path.stem, path.parent.name)
    details = node_details(plan)
    raw = _raw_nodes(path.stem, path.parent.name)
    assert list(details) == [p for p, _ in plan.nodes()] and len(raw) == len(details)
    for (_, found), node in zip(details.items(), raw, strict=True):
        expected = [
            (key, ", ".join(v) if isinstance(v, list) else v)
            for key in CONDITION_KEYS
            if (v := node.get(key))
        ]
        assert list(found.conditions) == expected


def test_a_bitmap_scan_shows_its_recheck_and_heap_blocks() -> None:
    from detector.model.plan_details import node_details

    plan = _from_text("range_bitmap_lossy")
    (heap,) = [d for (_, n), d in zip(plan.nodes(), node_details(plan).values(), strict=True)
               if n.node_type == "Bitmap Heap Scan"]  # fmt: skip
    shown = dict(heap.items())
    assert shown["Recheck Cond"].startswith("((id >= ")
    node = next(n for _, n in plan.nodes() if n.node_type == "Bitmap Heap Scan")
    assert node.lossy_heap_blocks and node.rows_removed_by_recheck
    assert (
        shown["Heap Blocks"]
        == f"exact={node.exact_heap_blocks or 0:,} lossy={node.lossy_heap_blocks:,}"
    )
    assert shown["Rows Removed by Index Recheck"] == f"{int(node.rows_removed_by_recheck):,}"


def test_a_plan_without_source_keeps_its_counters() -> None:
    """A plan built from a parsed document (the Python API) has no conditions to show, but the
    model's counters (workers, rows removed, sort method) are still each node's."""
    from detector.model.plan_details import node_details

    path = PLANS[0].parent.parent / "pg17" / "parallel_seq_scan.json"
    plan = parse_plan(json.loads(path.read_text())["explain"])
    assert plan.source is None
    details = node_details(plan)
    assert all(not d.conditions for d in details.values())
    gather = next(d for (_, n), d in zip(plan.nodes(), details.values(), strict=True)
                  if n.node_type == "Gather")  # fmt: skip
    assert dict(gather.counters)["Workers"].startswith("planned 2, launched ")


def test_the_plan_diff_marks_what_differs_between_matched_nodes() -> None:
    """Index scan -> bitmap scan of the same range: the scan rows match, and the index scan's
    Index Cond and the bitmap heap scan's Recheck Cond and heap blocks are marked as changed."""
    from detector.model.plan_details import node_details
    from detector.reports.comparison.html_plan import _cell
    from detector.reports.comparison.plan_diff import align

    index, bitmap = _from_text("range_index_scan"), _from_text("range_bitmap_scan")
    rows = align(index, bitmap)
    (scan,) = [r for r in rows if r.baseline and r.candidate and r.status == "changed"
               and r.baseline.node.relation]  # fmt: skip
    base, cand = node_details(index), node_details(bitmap)
    assert scan.baseline and scan.candidate
    left = _cell(scan.baseline, base, cand[scan.candidate.path])
    right = _cell(scan.candidate, cand, base[scan.baseline.path])
    assert left and right
    assert [(d.name, d.changed) for d in left.details] == [("Index Cond", True)]
    names = {d.name: d.changed for d in right.details}
    assert names["Recheck Cond"] and names["Heap Blocks"]
