"""PS110 partial-aggregation-changed: the parallel workers stopped (or started) pre-aggregating."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from detector.model import Finding, Plan, PlanNode, QueryComparison, Severity
from detector.model.units import fmt_count
from rules.base import rule
from rules.common import flip_context
from rules.matching import (
    RelationKey,
    key_text,
    parallel_relations,
    placed_nodes,
    relation_keys,
)

_STRATEGIES = {
    "Hashed": "HashAggregate",
    "Sorted": "GroupAggregate",
    "Plain": "Aggregate",
    "Mixed": "MixedAggregate",
}


@dataclass(frozen=True)
class PreAggregation:
    """A partial aggregate run by the parallel workers, and the Gather above it."""

    node: PlanNode
    gather: PlanNode

    @property
    def label(self) -> str:
        kind = _STRATEGIES.get(self.node.strategy or "", "Aggregate")
        return f"Partial {kind} under {self.gather.node_type}"


def pre_aggregations(plan: Plan) -> dict[RelationKey, PreAggregation]:
    """Partial aggregates under a Gather / Gather Merge, by the relations beneath them."""
    keys = relation_keys(plan)
    found: dict[RelationKey, PreAggregation] = {}
    for placed in placed_nodes(plan):
        node = placed.node
        if placed.gather is not None and node.partial_mode == "Partial":
            found.setdefault(keys[id(node)], PreAggregation(node, placed.gather))
    return found


def _rows(gather: PlanNode | None) -> str:
    rows = gather.actual_rows_total if gather is not None else None
    return fmt_count(rows)


@rule(
    "PS110",
    "partial-aggregation-changed",
    "plan-flip",
    Severity.WARNING,
    near_tie=0.02,
    needs_plan_change=True,
)
def partial_aggregation_changed(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """The parallel workers no longer pre-aggregate their rows, or now do.

    ## What it flags
    A partial aggregate (Partial HashAggregate, Partial GroupAggregate, Partial
    Aggregate) under a Gather or Gather Merge on one side's dominant plan with
    no partial aggregate over the same relations on the other side, while the
    other side still reads those relations under a Gather: the plan stays
    parallel, but where the aggregation runs changed. One finding per change,
    with the rows the Gather passed on each side. A plan that lost (or gained)
    its Gather altogether is left to PS106.

    Severity follows the measured verdict like PS100: regressed -> error,
    improved -> info, otherwise warning, or info for a near-tie (plan costs
    within `near_tie`, default 2%).

    ## Why it matters
    With partial aggregation each worker aggregates its share of the rows and
    the leader only combines one partial result per group and worker (Finalize
    Aggregate). Without it every row crosses the Gather to the leader, which
    aggregates them alone: the aggregation is no longer parallel, and the
    Gather's tuple transfer grows with the input instead of the groups. The
    planner weighs the two by its estimate of the number of groups, so a
    changed n_distinct, new statistics or a new version's costing can drop it.

    ## Example
    GROUP BY a (100 groups) over 100000 rows, after the candidate's n_distinct
    of a was set to -1 and ANALYZE (PG 15, as captured):

        partial aggregation dropped: the parallel workers no longer
        pre-aggregate sbtest_correlated (was Partial HashAggregate under
        Gather Merge); Gather Merge passes 100000 rows (was 100); 1.22x
        slower (95% CI 1.19-1.24)

    ## What to do
    Compare the estimated number of groups with the actual (PS301) and the
    column statistics of the grouping keys on both sides (pg_stats.n_distinct;
    ALTER TABLE ... ALTER COLUMN ... SET (n_distinct = ...) when ANALYZE gets
    it wrong, or extended statistics for several keys). Check that the
    aggregates are parallel-safe with a combine function on both sides, and
    compare parallel_tuple_cost.

    ## References
    - Parallel aggregation:
      https://www.postgresql.org/docs/current/parallel-plans.html
    - Statistics used by the planner:
      https://www.postgresql.org/docs/current/planner-stats.html
    - Parallel cost settings (parallel_tuple_cost):
      https://www.postgresql.org/docs/current/runtime-config-query.html
    """
    if not comparison.plan_changed:
        return
    base_plan = comparison.baseline.dominant.plan
    cand_plan = comparison.candidate.dominant.plan
    base, cand = pre_aggregations(base_plan), pre_aggregations(cand_plan)
    base_gathers, cand_gathers = parallel_relations(base_plan), parallel_relations(cand_plan)
    for change, mine, others, other_gathers in (
        ("dropped", base, cand, cand_gathers),
        ("added", cand, base, base_gathers),
    ):
        for key in sorted(set(mine) - set(others)):
            if not key or any(name not in other_gathers for name in key):
                continue  # the other side is not parallel over these relations: PS106
            found = mine[key]
            other_gather = other_gathers[key[0]]
            context = flip_context(comparison, float(options["near_tie"]))
            if change == "dropped":
                head = (
                    f"partial aggregation dropped: the parallel workers no longer pre-aggregate "
                    f"{key_text(key)} (was {found.label}); {other_gather.node_type} passes "
                    f"{_rows(other_gather)} rows (was {_rows(found.gather)})"
                )
                before, after = found.gather, other_gather
            else:
                head = (
                    f"partial aggregation added: the parallel workers now pre-aggregate "
                    f"{key_text(key)} ({found.label}); {found.gather.node_type} passes "
                    f"{_rows(found.gather)} rows (was {_rows(other_gather)})"
                )
                before, after = other_gather, found.gather
            evidence: dict[str, Any] = {
                "change": change,
                "relations": list(key),
                "partial_aggregate": found.label,
                "baseline_gather_rows": before.actual_rows_total,
                "candidate_gather_rows": after.actual_rows_total,
                **context.evidence,
            }
            message = "; ".join([head, *context.tail])
            yield partial_aggregation_changed.finding(
                comparison, message, evidence, context.severity
            )
