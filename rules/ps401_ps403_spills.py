"""PS401-PS403 spills: sorts and hashes spilling to disk, lossy bitmaps (work_mem too small).

The three rules look at the candidate's dominant plan and, with `only_new` (default), stay
quiet when the baseline's matching node (same relations beneath it) spilled too: a
comparison reports what changed. Nodes pair by relations, never by position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from detector.model import Finding, PlanNode, QueryComparison, Severity
from rules.base import rule
from rules.common import emit, fmt_blocks, fmt_count, timing_evidence
from rules.gucs import changes_text, settings_changes
from rules.matching import (
    RelationKey,
    facts,
    key_text,
    keyed,
    leaf_name,
    own_temp_blocks,
    parents,
    plan_nodes,
)

MEMORY = ("work_mem", "hash_mem_multiplier")
Spilled = Callable[[PlanNode], bool]
Describe = Callable[
    [QueryComparison, RelationKey, PlanNode, list[PlanNode]], tuple[str, dict[str, Any]]
]


def _memory_note(comparison: QueryComparison) -> str | None:
    changes = settings_changes(comparison.baseline, comparison.candidate, MEMORY)
    return changes_text(changes) if changes else None


def _sort_spilled(node: PlanNode) -> bool:
    return node.node_type == "Sort" and (
        node.sort_space_type == "Disk" or (node.sort_method or "").startswith("external")
    )


def _sort_text(node: PlanNode) -> str:
    where = {"Disk": "on disk", "Memory": "in memory"}.get(node.sort_space_type or "", "")
    return " ".join(part for part in (node.sort_method or "sort", where) if part)


@rule(
    "PS401",
    "sort-spilled-to-disk",
    "resources",
    Severity.WARNING,
    gate=lambda c, _: facts(c.candidate.dominant.plan).sort_spilled,
    only_new=True,
)
def sort_spilled_to_disk(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """A Sort of the candidate's plan spilled to disk (external merge).

    ## What it flags
    A Sort node in the candidate's dominant plan whose Sort Space Type is Disk
    (Sort Method `external merge` or `external sort`). With `only_new` (default
    true) a Sort over the same relations that spilled on the baseline too is not
    reported. The message gives the temp blocks the sort read and wrote, how the
    baseline sorted, and work_mem when it differs. Warning: the clock decides
    whether it hurts (PS200).

    ## Why it matters
    A sort that does not fit in work_mem writes sorted runs to temp files and
    merges them: extra I/O on every execution, and temp files compete with the
    rest of the server for disk bandwidth. A lower work_mem, more rows, wider
    rows or a new version's memory accounting can push a sort over the edge
    without any plan change.

    ## Example
    ORDER BY c over 20000 rows, work_mem 64MB -> 64kB (PG 15):

        Sort over sbtest2 spilled to disk: external merge on disk, 2083 blocks
        (16.3 MB) of temp I/O; baseline quicksort in memory; work_mem 64MB ->
        64kB

    ## What to do
    Raise work_mem for this query or role (SET LOCAL work_mem), return fewer or
    narrower rows, or provide the order from an index. Check
    log_temp_files / pg_stat_statements.temp_blks_written in production.

    ## References
    - Memory settings (work_mem):
      https://www.postgresql.org/docs/current/runtime-config-resource.html
    - Using EXPLAIN: https://www.postgresql.org/docs/current/using-explain.html
    - Logging temp files (log_temp_files):
      https://www.postgresql.org/docs/current/runtime-config-logging.html
    """
    if not facts(comparison.candidate.dominant.plan).sort_spilled:
        return
    yield from _spills(
        comparison,
        options,
        code="PS401",
        node_type="Sort",
        spilled=_sort_spilled,
        describe=_describe_sort,
    )


def _describe_sort(
    comparison: QueryComparison, key: RelationKey, node: PlanNode, base: list[PlanNode]
) -> tuple[str, dict[str, Any]]:
    temp = own_temp_blocks(node)
    text = (
        f"Sort over {key_text(key)} spilled to disk: {_sort_text(node)}, "
        f"{fmt_blocks(temp)} of temp I/O"
    )
    text += "; baseline " + (_sort_text(base[0]) if base else "had no sort over these rows")
    evidence = {
        "sort_method": node.sort_method,
        "sort_space_type": node.sort_space_type,
        "temp_blocks": temp,
        "baseline_sort_method": base[0].sort_method if base else None,
        "baseline_sort_space_type": base[0].sort_space_type if base else None,
    }
    return text, evidence


def _spills(
    comparison: QueryComparison,
    options: Mapping[str, Any],
    *,
    code: str,
    node_type: str,
    spilled: Spilled,
    describe: Describe,
) -> Iterator[Finding]:
    cand_plan = comparison.candidate.dominant.plan
    cand = keyed(cand_plan, lambda node: node.node_type == node_type)
    base = keyed(comparison.baseline.dominant.plan, lambda node: node.node_type == node_type)
    for key in sorted(cand):
        for node in cand[key]:
            if not spilled(node):
                continue
            before = base.get(key, [])
            if bool(options["only_new"]) and any(spilled(old) for old in before):
                continue
            text, evidence = describe(comparison, key, node, before)
            memory = _memory_note(comparison)
            if memory:
                text += f"; {memory}"
            evidence = {"relations": list(key), **evidence, **timing_evidence(comparison)}
            yield emit(code, comparison, text, evidence)
            break


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
    yield from _spills(
        comparison,
        options,
        code="PS402",
        node_type="Hash",
        spilled=lambda node: (node.hash_batches or 0) > 1,
        describe=describe,
    )


@rule(
    "PS403",
    "lossy-bitmap",
    "resources",
    Severity.WARNING,
    gate=lambda c, _: facts(c.candidate.dominant.plan).lossy_bitmap,
    only_new=True,
)
def lossy_bitmap(comparison: QueryComparison, options: Mapping[str, Any]) -> Iterator[Finding]:
    """A Bitmap Heap Scan of the candidate's plan went lossy (work_mem too small).

    ## What it flags
    A Bitmap Heap Scan in the candidate's dominant plan with Lossy Heap Blocks >
    0. With `only_new` (default true) a scan of the same relation that was lossy
    on the baseline too is not reported. The message gives the share of lossy
    blocks, the rows the recheck removed, the baseline's blocks and work_mem when
    it differs.

    ## Why it matters
    The bitmap of matching rows must fit in work_mem; when it does not, PostgreSQL
    keeps one bit per heap page instead of one per row, and every row of a lossy
    page is read and rechecked against the condition. The planner does not cost
    it, so the plan stays while its duration grows with the data.

    ## Example
    The sysbench range over 100000 rows, Index Scan -> Bitmap Heap Scan with
    work_mem 64kB (PG 17):

        Bitmap Heap Scan on sbtest1: 2578 of 3520 heap blocks lossy (73%):
        every row on a lossy page is rechecked (11 rows removed by the
        recheck); baseline read sbtest1 by Index Scan; work_mem 4MB (default)
        -> 64kB

    ## What to do
    Raise work_mem for the query; make the condition more selective; or, if the
    Index Scan was faster (PS101), compare random_page_cost and
    effective_cache_size on both sides.

    ## References
    - Combining multiple indexes (bitmap scans):
      https://www.postgresql.org/docs/current/indexes-bitmap-scans.html
    - Memory settings (work_mem):
      https://www.postgresql.org/docs/current/runtime-config-resource.html
    - Using EXPLAIN: https://www.postgresql.org/docs/current/using-explain.html
    """

    def describe(
        comparison: QueryComparison, key: RelationKey, node: PlanNode, base: list[PlanNode]
    ) -> tuple[str, dict[str, Any]]:
        lossy, exact = node.lossy_heap_blocks or 0, node.exact_heap_blocks or 0
        share = 100 * lossy / max(lossy + exact, 1)
        text = (
            f"Bitmap Heap Scan on {key_text(key)}: {lossy} of {lossy + exact} heap blocks lossy "
            f"({share:.0f}%): every row on a lossy page is rechecked"
        )
        if node.rows_removed_by_recheck:
            removed = node.rows_removed_by_recheck * (node.actual_loops or 1.0)
            text += f" ({fmt_count(removed)} rows removed by the recheck)"
        if base:
            text += f"; baseline {base[0].lossy_heap_blocks or 0} lossy blocks"
        else:
            other = [
                n.node_type
                for _, n in plan_nodes(comparison.baseline.dominant.plan)
                if leaf_name(n) in key
            ]
            if other:
                text += f"; baseline read {key_text(key)} by {other[0]}"
        evidence = {
            "lossy_heap_blocks": lossy,
            "exact_heap_blocks": exact,
            "rows_removed_by_recheck": node.rows_removed_by_recheck,
            "baseline_lossy_heap_blocks": base[0].lossy_heap_blocks if base else None,
        }
        return text, evidence

    if not facts(comparison.candidate.dominant.plan).lossy_bitmap:
        return
    yield from _spills(
        comparison,
        options,
        code="PS403",
        node_type="Bitmap Heap Scan",
        spilled=lambda node: (node.lossy_heap_blocks or 0) > 0,
        describe=describe,
    )
