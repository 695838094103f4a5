"""PS109 sort-agg-strategy-changed: rows are grouped or sorted with another strategy."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, Plan, PlanNode, QueryComparison, Severity
from rules.base import rule
from rules.common import flip_context
from rules.matching import RelationKey, key_text, keyed

_AGGREGATE_STRATEGIES = {
    "Hashed": "HashAggregate",
    "Sorted": "GroupAggregate",
    "Mixed": "MixedAggregate",
}


def grouping_label(node: PlanNode) -> str | None:
    """HashAggregate, GroupAggregate, MixedAggregate, Group, Unique, HashSetOp, SetOp."""
    if node.partial_mode == "Partial":
        return None
    if node.node_type == "Aggregate":
        return _AGGREGATE_STRATEGIES.get(node.strategy or "")
    if node.node_type in ("Group", "Unique"):
        return node.node_type
    if node.node_type == "SetOp":
        return "HashSetOp" if node.strategy == "Hashed" else "SetOp"
    return None


def sort_label(node: PlanNode) -> str | None:
    return {"Sort": "Sort", "Incremental Sort": "IncrementalSort"}.get(node.node_type)


def _labels(plan: Plan, label: Any) -> dict[RelationKey, list[str]]:
    groups = keyed(plan, lambda node: label(node) is not None)
    return {key: sorted(label(node) for node in nodes) for key, nodes in groups.items()}


@rule(
    "PS109",
    "sort-agg-strategy-changed",
    "plan-flip",
    Severity.WARNING,
    near_tie=0.02,
    needs_plan_change=True,
)
def sort_aggregate_strategy_changed(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """Rows are grouped or sorted with another strategy (hash, sort, incremental).

    ## What it flags
    Over the same relations (matched by the relations beneath the node, not by
    position), the candidate groups with another strategy (HashAggregate,
    GroupAggregate, MixedAggregate, Group, Unique, HashSetOp, SetOp; partial
    aggregates of a parallel plan are left out) or sorts with another kind of
    sort (Sort vs Incremental Sort). One finding per changed grouping or sort.

    Severity follows the measured verdict like PS100 (near-tie within
    `near_tie`, default 2%).

    ## Why it matters
    A HashAggregate needs memory for every group (work_mem x
    hash_mem_multiplier) and spills batches to disk past it; a GroupAggregate
    needs its input sorted, so it brings a Sort (or an index order) and returns
    groups in order. An Incremental Sort sorts only within groups of an already
    sorted prefix and can stop early under a LIMIT; losing it means a full sort
    of every row. The choice hinges on the estimated number of groups and on
    work_mem, both of which differ between versions and settings.

    ## Example
    GROUP BY k over sbtest2 (20000 rows), enable_hashagg off on the candidate
    (PG 18):

        grouping over sbtest2: HashAggregate -> GroupAggregate (with a Sort);
        1.65x slower (95% CI 1.62-1.69)

    ## What to do
    Compare the estimated number of groups with the actual (PS301) and work_mem /
    hash_mem_multiplier on both sides (PS500). For a lost Incremental Sort, check
    that the index giving the presorted prefix is still used and that
    enable_incremental_sort is on.

    ## References
    - Memory settings (work_mem, hash_mem_multiplier):
      https://www.postgresql.org/docs/current/runtime-config-resource.html
    - Planner method settings (enable_hashagg, enable_incremental_sort):
      https://www.postgresql.org/docs/current/runtime-config-query.html
    - Using EXPLAIN: https://www.postgresql.org/docs/current/using-explain.html
    """
    if not comparison.plan_changed:
        return
    base_plan = comparison.baseline.dominant.plan
    cand_plan = comparison.candidate.dominant.plan
    base_sorts, cand_sorts = _labels(base_plan, sort_label), _labels(cand_plan, sort_label)
    for kind, label in (("grouping", grouping_label), ("sort", sort_label)):
        base, cand = _labels(base_plan, label), _labels(cand_plan, label)
        for key in sorted(set(base) & set(cand)):
            if base[key] == cand[key]:
                continue
            head = f"{kind} over {key_text(key)}: {', '.join(base[key])} -> {', '.join(cand[key])}"
            if kind == "grouping":
                added = len(cand_sorts.get(key, [])) - len(base_sorts.get(key, []))
                if added > 0:
                    head += " (with a Sort)"
                elif added < 0:
                    head += " (without its Sort)"
            context = flip_context(comparison, float(options["near_tie"]))
            evidence: dict[str, Any] = {
                "kind": kind,
                "relations": list(key),
                "baseline_strategies": base[key],
                "candidate_strategies": cand[key],
                **context.evidence,
            }
            message = "; ".join([head, *context.tail])
            yield sort_aggregate_strategy_changed.finding(
                comparison, message, evidence, context.severity
            )
