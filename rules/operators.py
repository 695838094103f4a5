"""PS106, PS108, PS109 how the executor runs the plan: parallel workers, JIT, sort and
grouping strategies. Nodes pair by the relations beneath them, never by position."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, Plan, PlanNode, QueryComparison, Severity, Verdict
from detector.model.units import fmt_duration
from rules.base import rule
from rules.common import emit, flip_context
from rules.gucs import changes_text, settings_changes, side_settings
from rules.matching import (
    GATHER_NODES,
    RelationKey,
    facts,
    key_text,
    keyed,
    nodes_of_type,
    plan_nodes,
    relation_keys,
)


def _parallel_relations(plan: Plan) -> dict[str, PlanNode]:
    """Relation -> the Gather it is read under (the first, in plan order)."""
    found: dict[str, PlanNode] = {}
    keys = relation_keys(plan)
    for node in nodes_of_type(plan, *GATHER_NODES):
        for name in keys[id(node)]:
            found.setdefault(name, node)
    return found


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
    """
    base_plan = comparison.baseline.dominant.plan
    cand_plan = comparison.candidate.dominant.plan
    if comparison.plan_changed:
        base, cand = _parallel_relations(base_plan), _parallel_relations(cand_plan)
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
            yield emit("PS106", comparison, message, evidence, context.severity)
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
        yield emit("PS106", comparison, "; ".join([head, *context.tail]), evidence, severity)


@rule(
    "PS108",
    "jit-newly-used",
    "plan-flip",
    Severity.WARNING,
    gate=lambda c, _: c.candidate.dominant.plan.jit_used and not c.baseline.dominant.plan.jit_used,
    min_jit_ms=0.0,
)
def jit_newly_used(comparison: QueryComparison, options: Mapping[str, Any]) -> Iterator[Finding]:
    """The candidate compiles the query with JIT and the baseline did not.

    ## What it flags
    The candidate's dominant plan reports JIT compilation (EXPLAIN's JIT section
    with at least one function) where the baseline's does not, with at least
    `min_jit_ms` (default 0.0) of JIT time. The message gives the JIT time
    against the execution time and the jit settings that differ. The plan shape
    can stay the same: JIT changes how it is executed.

    Severity follows the measured verdict like PS100: regressed -> error,
    improved -> info, otherwise warning.

    ## Why it matters
    JIT is switched on by plan cost (jit_above_cost, default 100000;
    jit_inline_above_cost and jit_optimize_above_cost, 500000), not by measured
    time. Compiling, inlining and optimizing take tens to hundreds of
    milliseconds, which only pays off for long analytic queries; an OLTP query
    whose estimate crosses the threshold (or a server where jit was turned on)
    pays the compile time on every execution. Builds without LLVM cannot JIT at
    all, so two servers of one version can differ.

    ## Example
    JIT on with every threshold at 0 on the candidate, the same plan (PG 15):

        JIT newly used: 43.6 ms compiling in a 102 ms execution (43%); jit
        settings: jit off -> on, jit_above_cost 100000 (default) -> 0,
        jit_inline_above_cost 500000 (default) -> 0, jit_optimize_above_cost
        500000 (default) -> 0; 1.43x slower (95% CI 1.39-1.46)

    ## What to do
    Raise jit_above_cost (and the inline/optimize thresholds) above the cost of
    your OLTP queries, or set jit = off for the workload; keep JIT for long
    reporting queries where the compile time is a small share.
    """
    base_plan = comparison.baseline.dominant.plan
    cand_plan = comparison.candidate.dominant.plan
    if not cand_plan.jit_used or base_plan.jit_used:
        return
    jit_ms = cand_plan.jit_total_ms
    if jit_ms is not None and jit_ms < float(options["min_jit_ms"]):
        return
    context = flip_context(comparison, None)
    head = "JIT newly used"
    if jit_ms is not None:
        head += f": {fmt_duration(jit_ms)} compiling"
        if cand_plan.execution_ms:
            share = 100 * jit_ms / cand_plan.execution_ms
            head += f" in a {fmt_duration(cand_plan.execution_ms)} execution ({share:.0f}%)"
    jit_settings = [
        c
        for c in settings_changes(comparison.baseline, comparison.candidate)
        if c.category == "jit"
    ]
    if jit_settings:
        head += f"; jit settings: {changes_text(jit_settings)}"
    evidence: dict[str, Any] = {
        "jit_total_ms": jit_ms,
        "candidate_execution_ms": cand_plan.execution_ms,
        "candidate_jit_settings": {
            k: v for k, v in side_settings(comparison.candidate).items() if k.startswith("jit")
        },
        **context.evidence,
    }
    yield emit("PS108", comparison, "; ".join([head, *context.tail]), evidence, context.severity)


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
            yield emit("PS109", comparison, message, evidence, context.severity)
