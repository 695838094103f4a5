"""PS107 memoize-materialize-changed: a Memoize or Materialize node appeared or is gone."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, Plan, PlanNode, QueryComparison, Severity
from detector.model.fingerprint import node_label
from detector.model.units import fmt_count
from rules.base import rule
from rules.common import flip_context
from rules.matching import RelationKey, key_text, keyed

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

    ## References
    - Planner method settings (enable_memoize, enable_material):
      https://www.postgresql.org/docs/current/runtime-config-query.html
    - Using EXPLAIN: https://www.postgresql.org/docs/current/using-explain.html
    - Statistics used by the planner:
      https://www.postgresql.org/docs/current/planner-stats.html
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
            yield memoize_materialize_changed.finding(
                comparison, message, evidence, context.severity
            )
