"""PS403 lossy-bitmap: a bitmap heap scan's bitmap went lossy (work_mem too small)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, PlanNode, QueryComparison, Severity
from detector.model.units import fmt_count
from rules.base import rule
from rules.matching import (
    RelationKey,
    facts,
    key_text,
    leaf_name,
    plan_nodes,
)
from rules.spills import spill_findings


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
    yield from spill_findings(
        comparison,
        options,
        rule=lossy_bitmap,
        node_type="Bitmap Heap Scan",
        spilled=lambda node: (node.lossy_heap_blocks or 0) > 0,
        describe=describe,
    )
