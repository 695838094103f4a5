"""PS106 parallelism-changed: parallel workers gained or lost, or fewer launched than planned."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, Plan, PlanNode, QueryComparison, Severity, Verdict
from rules.base import rule
from rules.common import flip_context
from rules.gucs import changes_text, settings_changes
from rules.matching import (
    GATHER_NODES,
    facts,
    key_text,
    parallel_relations,
    plan_nodes,
    relation_keys,
)


def _workers(gather: PlanNode) -> str:
    planned, launched = gather.workers_planned, gather.workers_launched
    text = f"{gather.node_type} with {planned if planned is not None else '?'} workers planned"
    if launched is not None:
        text += f", {launched} launched"
    return text


@rule(
    "PS106",
    "parallelism-changed",
    "plan-flip",
    Severity.WARNING,
    gate=lambda c, _: c.plan_changed or facts(c.candidate.dominant.plan).workers_short,
    near_tie=0.02,
)
def parallelism_changed(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """Parallel workers gained or lost, or fewer workers launched than planned.

    ## What it flags
    - Relations read under a Gather / Gather Merge on one side and serially on
      the other (one finding for those that gained parallelism, one for those
      that lost it). Severity follows the measured verdict like PS100
      (near-tie within `near_tie`, default 2%).
    - On the candidate, a Gather that launched fewer workers than it planned: its
      own finding, whether or not the plan changed. Error when the query is
      measured slower, else warning.

    A plan that stays parallel while its aggregation moves above the Gather
    (the workers no longer pre-aggregate) is PS110.

    ## Why it matters
    A parallel plan is costed on the workers it plans: the planner divides the
    scan's rows by the parallel divisor (2.4 for two workers) and adds
    parallel_setup_cost and parallel_tuple_cost. Workers come from a shared pool
    (max_parallel_workers, max_worker_processes); when the pool is exhausted the
    leader runs the whole plan alone, slower than the serial plan it beat on
    paper. Gaining parallelism is not free either: setup and tuple transfer cost
    time, and a parallel plan competes with other sessions for CPUs.

    ## Example
    The parallel scan of sbtest1 with max_parallel_workers 0 on the candidate
    (PG 17, as captured):

        Gather over sbtest1: 0 of 2 planned workers launched
        (max_parallel_workers 8 (default) -> 0): the leader ran the parallel
        plan alone; 1.96x slower (95% CI 1.94-2.02)

    ## What to do
    For workers not launched: raise max_parallel_workers / max_worker_processes,
    or lower max_parallel_workers_per_gather so plans match what the pool can
    give under load. For a flip: compare parallel_setup_cost,
    parallel_tuple_cost, min_parallel_table_scan_size and
    max_parallel_workers_per_gather on both sides (PS500), and measure under the
    production concurrency.

    ## References
    - Parallel query: https://www.postgresql.org/docs/current/parallel-query.html
    - How parallel query works:
      https://www.postgresql.org/docs/current/how-parallel-query-works.html
    - Parallel worker settings (max_parallel_workers):
      https://www.postgresql.org/docs/current/runtime-config-resource.html
    """
    base_plan = comparison.baseline.dominant.plan
    cand_plan = comparison.candidate.dominant.plan
    if comparison.plan_changed:
        base, cand = parallel_relations(base_plan), parallel_relations(cand_plan)
        for change, names in (
            ("gained", sorted(set(cand) - set(base))),
            ("lost", sorted(set(base) - set(cand))),
        ):
            if not names:
                continue
            gather = (cand if change == "gained" else base)[names[0]]
            context = flip_context(comparison, float(options["near_tie"]))
            if change == "gained":
                head = f"parallelism gained: {', '.join(names)} now read under {_workers(gather)}"
            else:
                head = f"parallelism lost: {', '.join(names)} now read serially (was {_workers(gather)})"
            evidence: dict[str, Any] = {
                "change": change,
                "relations": names,
                "workers_planned": gather.workers_planned,
                "workers_launched": gather.workers_launched,
                **context.evidence,
            }
            message = "; ".join([head, *context.tail])
            yield parallelism_changed.finding(comparison, message, evidence, context.severity)
    yield from _not_launched(comparison, cand_plan)


def _short(node: PlanNode) -> bool:
    planned, launched = node.workers_planned, node.workers_launched
    return planned is not None and launched is not None and launched < planned


def _not_launched(comparison: QueryComparison, plan: Plan) -> Iterator[Finding]:
    if not facts(plan).workers_short:
        return
    pool = settings_changes(
        comparison.baseline,
        comparison.candidate,
        ("max_parallel_workers", "max_worker_processes", "max_parallel_workers_per_gather"),
    )
    keys = relation_keys(plan)
    for path, node in plan_nodes(plan):
        if node.node_type not in GATHER_NODES or not _short(node):
            continue
        planned, launched = node.workers_planned, node.workers_launched
        context = flip_context(comparison, None)
        head = (
            f"{node.node_type} over {key_text(keys[id(node)])}: {launched} of {planned} "
            "planned workers launched"
        )
        if pool:
            head += f" ({changes_text(pool)})"
        head += (
            ": the leader ran the parallel plan alone"
            if launched == 0
            else ": the plan was costed for more workers than it got"
        )
        severity = (
            Severity.ERROR if comparison.timing.verdict is Verdict.REGRESSED else (Severity.WARNING)
        )
        evidence: dict[str, Any] = {
            "change": "workers_not_launched",
            "path": path,
            "workers_planned": planned,
            "workers_launched": launched,
            "settings": [c.as_evidence() for c in pool],
            **context.evidence,
        }
        yield parallelism_changed.finding(
            comparison, "; ".join([head, *context.tail]), evidence, severity
        )
