"""PS105 join-order-changed: the relations are joined in another order."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, Plan, QueryComparison, Severity
from rules.base import rule
from rules.common import flip_context
from rules.matching import Join, joins, top_joins
from rules.matching import join_tree as tree_text
from rules.pairing import by_relations


def _order_changed(base: list[Join], cand: list[Join]) -> bool:
    """Different intermediate join sets, or a join of one method with its sides swapped."""
    if Counter(j.relations for j in base) != Counter(j.relations for j in cand):
        return True
    by_key = by_relations(cand)
    for old in base:
        same = [new for new in by_key[old.relations] if new.method == old.method]
        if same and all((new.outer, new.inner) != (old.outer, old.inner) for new in same):
            return True
    return False


def _trees(plan: Plan) -> str:
    return "; ".join(tree_text(node) for node in top_joins(plan))


@rule(
    "PS105",
    "join-order-changed",
    "plan-flip",
    Severity.WARNING,
    near_tie=0.02,
    needs_plan_change=True,
)
def join_order_changed(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """The relations are joined in another order.

    ## What it flags
    The candidate's dominant plan joins the query's relations in a different
    order: the intermediate join results are different sets of relations, or a
    join of the same relations with the same method has swapped its outer and
    inner sides. The message shows both join trees, outer side first. A side swap
    that comes with a change of method is left to PS104 alone (a Hash Join always
    builds its hash table from its inner side, so a Nested Loop -> Hash Join flip
    often reverses the order just by its shape). One finding per query.

    Severity follows the measured verdict like PS100 (near-tie within
    `near_tie`, default 2%).

    ## Why it matters
    The join order decides the size of every intermediate result: joining the
    most selective relations first keeps them small. The planner orders joins by
    its row estimates, so a new order usually means the estimates moved
    (statistics, settings, a new version's selectivity rules) and a bad order can
    multiply the work of every later join. Above join_collapse_limit /
    from_collapse_limit (8) relations the planner stops searching all orders and
    follows the query's text, and above geqo_threshold (12) it searches
    genetically, which is not deterministic.

    ## Example
    The sysbench join, sbtest1 forced to the outer side on the candidate (PG 15):

        join order changed: (sbtest2 b x sbtest1 a) -> (sbtest1 a x sbtest2
        b); 12.10x slower (95% CI 11.83-12.27)

    ## What to do
    Compare estimated and actual rows of each side (PS301); refresh statistics
    (ANALYZE) or add extended statistics for correlated predicates (CREATE
    STATISTICS). If a join_collapse_limit / from_collapse_limit / geqo setting
    differs between the sides (PS500), align it.

    ## References
    - Controlling the planner with explicit JOIN clauses:
      https://www.postgresql.org/docs/current/explicit-joins.html
    - Genetic query optimizer settings (geqo):
      https://www.postgresql.org/docs/current/runtime-config-query.html
    - Statistics used by the planner:
      https://www.postgresql.org/docs/current/planner-stats.html
    """
    if not comparison.plan_changed:
        return
    base_plan = comparison.baseline.dominant.plan
    cand_plan = comparison.candidate.dominant.plan
    base, cand = joins(base_plan), joins(cand_plan)
    if not base or not cand or not _order_changed(base, cand):
        return
    before, after = _trees(base_plan), _trees(cand_plan)
    if before == after:
        return
    context = flip_context(comparison, float(options["near_tie"]))
    evidence: dict[str, Any] = {
        "baseline_join_order": before,
        "candidate_join_order": after,
        "baseline_joins": [[list(j.outer), list(j.inner), j.method] for j in base],
        "candidate_joins": [[list(j.outer), list(j.inner), j.method] for j in cand],
        **context.evidence,
    }
    message = "; ".join([f"join order changed: {before} -> {after}", *context.tail])
    yield join_order_changed.finding(comparison, message, evidence, context.severity)
