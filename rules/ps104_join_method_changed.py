"""PS104 join-method-changed: the same relations are joined with another method."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, Severity
from detector.model.fingerprint import node_label
from rules.base import rule
from rules.common import flip_context
from rules.matching import Join, joins, key_text
from rules.pairing import by_relations


def _method_label(join: Join) -> str:
    """`HashJoin`, `NestedLoop[Semi]`: the join node's label without relations."""
    return node_label(join.node)


@rule(
    "PS104",
    "join-method-changed",
    "plan-flip",
    Severity.WARNING,
    near_tie=0.02,
    needs_plan_change=True,
)
def join_method_changed(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """The same relations are joined with another method (nested loop, hash, merge).

    ## What it flags
    A join of the same set of relations on both sides (a Nested Loop, Hash Join
    or Merge Join; matched by the relations beneath it, not by its position)
    whose method differs between the baseline's and the candidate's dominant
    plans. One finding per changed join.

    Severity follows the measured verdict like PS100: regressed -> error,
    improved -> info, otherwise warning, or info for a near-tie (plan costs
    within `near_tie`, default 2%).

    ## Why it matters
    The join methods scale differently: a Nested Loop costs one inner lookup per
    outer row and is the best plan for a few rows and the worst for many; a Hash
    Join pays to build a hash table (and spills to disk past work_mem x
    hash_mem_multiplier, PS402); a Merge Join needs both inputs sorted. Which one
    wins hinges on the row estimates (PS301), so a join-method flip is often an
    estimate error made visible.

    ## Example
    The sysbench join on PG 15, merge joins disabled on the candidate:

        sbtest1 a x sbtest2 b: MergeJoin -> HashJoin; 9.50x slower (95% CI
        9.30-9.70)

    ## What to do
    Compare estimated and actual rows at the join and its inputs (PS301): an
    under-estimate favours a Nested Loop, an over-estimate a Hash Join. Check
    work_mem and the enable_* settings of the two sides (PS500). To test, disable
    the new method for this query only (`SET enable_hashjoin = off`) and compare.

    ## References
    - Planner/optimizer: join methods:
      https://www.postgresql.org/docs/current/planner-optimizer.html
    - Planner method and cost settings (enable_*, random_page_cost):
      https://www.postgresql.org/docs/current/runtime-config-query.html
    - Using EXPLAIN: https://www.postgresql.org/docs/current/using-explain.html
    """
    if not comparison.plan_changed:
        return
    base = by_relations(joins(comparison.baseline.dominant.plan))
    cand = by_relations(joins(comparison.candidate.dominant.plan))
    for key in sorted(set(base) & set(cand)):
        before = sorted(_method_label(j) for j in base[key])
        after = sorted(_method_label(j) for j in cand[key])
        if before == after:
            continue
        context = flip_context(comparison, float(options["near_tie"]))
        head = f"{key_text(key)}: {', '.join(before)} -> {', '.join(after)}"
        evidence: dict[str, Any] = {
            "relations": list(key),
            "baseline_methods": before,
            "candidate_methods": after,
            "baseline_paths": [j.path for j in base[key]],
            "candidate_paths": [j.path for j in cand[key]],
            "baseline_join_rows": [j.node.actual_rows_total for j in base[key]],
            "candidate_join_rows": [j.node.actual_rows_total for j in cand[key]],
            **context.evidence,
        }
        message = "; ".join([head, *context.tail])
        yield join_method_changed.finding(comparison, message, evidence, context.severity)
