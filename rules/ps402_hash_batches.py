"""PS402 hash-batches: a hash join's hash table no longer fits in memory (batches > 1)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, PlanNode, QueryComparison, Severity
from rules.base import rule
from rules.common import fmt_blocks
from rules.matching import (
    RelationKey,
    facts,
    key_text,
    own_temp_blocks,
    parents,
    plan_nodes,
)
from rules.spills import spill_findings


@rule(
    "PS402",
    "hash-batches",
    "resources",
    Severity.WARNING,
    gate=lambda c, _: facts(c.candidate.dominant.plan).hash_batched,
    only_new=True,
)
def hash_batches(comparison: QueryComparison, options: Mapping[str, Any]) -> Iterator[Finding]:
    """A hash table of the candidate's plan was split into batches on disk.

    ## What it flags
    A Hash node (the inner side of a Hash Join) in the candidate's dominant plan
    with Hash Batches > 1. With `only_new` (default true) a hash over the same
    relations that had several batches on the baseline too is not reported. The
    message says when the batches grew at run time beyond what was planned (the
    inner side was under-estimated), the join's temp I/O, the baseline's
    batches, and work_mem / hash_mem_multiplier when they differ.

    ## Why it matters
    A hash table larger than work_mem x hash_mem_multiplier is split into
    batches: both join inputs are partitioned to temp files and joined batch by
    batch, writing and reading each row once more. When the batches grew at run
    time the planner costed an in-memory join that did not happen.

    ## Example
    The sysbench hash join with work_mem 64kB and hash_mem_multiplier 1 (PG 17):

        Hash over sbtest2 b: 2 batches (planned 2), 690 blocks (5.4 MB) of
        temp I/O in the join; baseline 1 batch; hash_mem_multiplier 2
        (default) -> 1, work_mem 4MB (default) -> 64kB

    ## What to do
    Raise work_mem or hash_mem_multiplier (PG 13+) for the query, or fix the
    inner side's row estimate (PS301) so the planner picks a join that fits.

    ## References
    - Memory settings (work_mem, hash_mem_multiplier):
      https://www.postgresql.org/docs/current/runtime-config-resource.html
    - Using EXPLAIN: https://www.postgresql.org/docs/current/using-explain.html
    """

    def describe(
        comparison: QueryComparison, key: RelationKey, node: PlanNode, base: list[PlanNode]
    ) -> tuple[str, dict[str, Any]]:
        plan = comparison.candidate.dominant.plan
        path = next(p for p, n in plan_nodes(plan) if n is node)
        parent = parents(plan).get(path)
        temp = own_temp_blocks(parent[1]) + own_temp_blocks(node) if parent else 0
        planned = node.original_hash_batches
        text = f"Hash over {key_text(key)}: {node.hash_batches} batches"
        if planned is not None:
            text += f" (planned {planned})"
            if planned < (node.hash_batches or 0):
                text += ": the hash grew at run time, the inner side was under-estimated"
        text += f", {fmt_blocks(temp)} of temp I/O in the join"
        old = [n.hash_batches for n in base if n.hash_batches is not None]
        if old:
            text += f"; baseline {old[0]} batch{'es' if old[0] > 1 else ''}"
        evidence = {
            "hash_batches": node.hash_batches,
            "original_hash_batches": planned,
            "temp_blocks": temp,
            "baseline_hash_batches": old[0] if old else None,
        }
        return text, evidence

    if not facts(comparison.candidate.dominant.plan).hash_batched:
        return
    yield from spill_findings(
        comparison,
        options,
        rule=hash_batches,
        node_type="Hash",
        spilled=lambda node: (node.hash_batches or 0) > 1,
        describe=describe,
    )
