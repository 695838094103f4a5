"""PS104, PS105, PS107 plan flips in joins: method, order, and the caches between them.

Joins pair by the set of relations they join (rules.matching.joins), Memoize and
Materialize nodes by the relations beneath them; never by position in the tree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, Plan, PlanNode, QueryComparison, Severity
from detector.model.fingerprint import node_label
from rules.base import rule
from rules.common import emit, flip_context, fmt_count
from rules.matching import Join, RelationKey, joins, key_text, keyed, top_joins
from rules.matching import join_tree as tree_text


def _by_relations(found: list[Join]) -> dict[RelationKey, list[Join]]:
    groups: dict[RelationKey, list[Join]] = {}
    for join in found:
        groups.setdefault(join.relations, []).append(join)
    return groups


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
    """
    if not comparison.plan_changed:
        return
    base = _by_relations(joins(comparison.baseline.dominant.plan))
    cand = _by_relations(joins(comparison.candidate.dominant.plan))
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
        yield emit("PS104", comparison, message, evidence, context.severity)


def _order_changed(base: list[Join], cand: list[Join]) -> bool:
    """Different intermediate join sets, or a join of one method with its sides swapped."""
    if Counter(j.relations for j in base) != Counter(j.relations for j in cand):
        return True
    by_key = _by_relations(cand)
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
    yield emit("PS105", comparison, message, evidence, context.severity)


CACHE_NODES = ("Memoize", "Materialize")


def _caches(plan: Plan, kind: str) -> dict[RelationKey, list[PlanNode]]:
    return keyed(plan, lambda node: node.node_type == kind)


def _scan_loops(plan: Plan, key: RelationKey) -> PlanNode | None:
    """The most-repeated scan reading exactly `key` (what a cache would have spared)."""
    scans = keyed(plan, lambda node: node.relation is not None and not node.children)
    nodes = scans.get(key) or keyed(plan, lambda node: node.relation is not None).get(key, [])
    return max(nodes, key=lambda n: n.actual_loops or 0.0, default=None)


def _cache_facts(kind: str, node: PlanNode) -> str:
    loops = node.actual_loops
    if loops is None:
        return ""
    if kind == "Memoize" and node.children:
        misses = node.children[0].actual_loops
        if misses is not None:
            return f" ({fmt_count(loops)} lookups, {fmt_count(misses)} executions of its input)"
    return f" (scanned {fmt_count(loops)} times)"


@rule(
    "PS107",
    "memoize-materialize-changed",
    "plan-flip",
    Severity.WARNING,
    near_tie=0.02,
    needs_plan_change=True,
)
def memoize_materialize_changed(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """A Memoize or Materialize node appeared or is gone.

    ## What it flags
    A Memoize or Materialize over the same relations (matched by the relations
    beneath it, not by position) present on one side's dominant plan and not on
    the other's. One finding per node that appeared or went. The message gives
    how often the cache was read and how often its input ran, or, for a cache
    that went, how often the scan it used to spare now runs.

    Severity follows the measured verdict like PS100 (near-tie within
    `near_tie`, default 2%).

    ## Why it matters
    Both sit on the inner side of a Nested Loop and turn repeated inner scans
    into memory reads. Memoize (PG 14+) caches inner results per parameter value:
    it pays off when few distinct keys repeat, and it relies on the estimate of
    distinct values, so a wrong ndistinct makes it thrash (evictions) or makes
    the planner skip it. Materialize keeps the inner rows of a rescanned input.
    One appearing or going changes the work done per outer row, often by an
    order of magnitude.

    ## Example
    A nested loop over 20000 outer rows with 1000 distinct keys, enable_memoize
    off on the candidate (PG 15):

        Memoize over sbtest2 b gone: IndexScan(sbtest2 sbtest2_pkey) now runs
        20000 times (was 1000); 1.69x slower (95% CI 1.66-1.72)

    ## What to do
    Check the distinct-value estimate of the join key (pg_stats.n_distinct;
    ALTER TABLE ... ALTER COLUMN ... SET (n_distinct = ...) when it is wrong) and
    the settings of both sides (enable_memoize, enable_material, work_mem x
    hash_mem_multiplier, which bounds Memoize's cache).
    """
    if not comparison.plan_changed:
        return
    base_plan = comparison.baseline.dominant.plan
    cand_plan = comparison.candidate.dominant.plan
    for kind in CACHE_NODES:
        base, cand = _caches(base_plan, kind), _caches(cand_plan, kind)
        for key in sorted(set(base) | set(cand)):
            extra = len(cand.get(key, [])) - len(base.get(key, []))
            if extra == 0:
                continue
            context = flip_context(comparison, float(options["near_tie"]))
            where = f"{kind} over {key_text(key)}"
            if extra > 0:
                head = f"{where} appeared" + _cache_facts(kind, cand[key][0])
                scan = _scan_loops(base_plan, key)
                if scan is not None and (scan.actual_loops or 0.0) > 1:
                    head += f"; {node_label(scan)} ran {fmt_count(scan.actual_loops)} times"
            else:
                head = f"{where} gone"
                scan, old = _scan_loops(cand_plan, key), _scan_loops(base_plan, key)
                now = scan.actual_loops if scan is not None else None
                was = old.actual_loops if old is not None else None
                if scan is not None and now is not None and (was is None or now > was):
                    head += f": {node_label(scan)} now runs {fmt_count(now)} times"
                    if was is not None:
                        head += f" (was {fmt_count(was)})"
            evidence: dict[str, Any] = {
                "node_type": kind,
                "relations": list(key),
                "change": "appeared" if extra > 0 else "gone",
                "baseline_count": len(base.get(key, [])),
                "candidate_count": len(cand.get(key, [])),
                **context.evidence,
            }
            message = "; ".join([head, *context.tail])
            yield emit("PS107", comparison, message, evidence, context.severity)
