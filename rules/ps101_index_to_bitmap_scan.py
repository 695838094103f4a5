"""PS101 index-to-bitmap-scan: a relation read by Index Scan is read by Bitmap Heap Scan."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, ScanAccess, Severity
from detector.model.fingerprint import short_name
from rules.base import rule
from rules.common import flip_severity, node_at, timing_evidence
from rules.common import near_tie as _near_tie
from rules.matching import accesses
from rules.pairing import pair_by_relation, scan_text, unmatched

INDEX_SCANS = ("Index Scan", "Index Only Scan")
BITMAP_HEAP_SCAN = "Bitmap Heap Scan"


def index_to_bitmap_pairs(
    baseline: list[ScanAccess], candidate: list[ScanAccess]
) -> list[tuple[ScanAccess, ScanAccess]]:
    """Pair baseline index reads with candidate bitmap heap reads of the same relation.

    Matching is by relation, never by position: reads that stay the same are set aside
    first, then each remaining Index (Only) Scan takes a Bitmap Heap Scan of its relation,
    one on the same index when there is one.
    """
    before = [a for a in unmatched(baseline, candidate) if a.node_type in INDEX_SCANS]
    after = [a for a in unmatched(candidate, baseline) if a.node_type == BITMAP_HEAP_SCAN]
    return pair_by_relation(before, after)


@rule(
    "PS101",
    "index-to-bitmap-scan",
    "plan-flip",
    Severity.WARNING,
    near_tie=0.02,
    needs_plan_change=True,
)
def index_to_bitmap_scan(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """A relation read by Index Scan on the baseline is read by Bitmap Heap Scan now.

    ## What it flags
    For each relation, an Index Scan or Index Only Scan in the baseline's dominant
    plan that became a Bitmap Heap Scan in the candidate's dominant plan. Nodes
    are matched by relation (and index), not by position, so the flip is found
    under an added Sort, Aggregate or Gather. One finding per flipped relation
    read.

    Severity is the same as PS100: regressed -> error, improved -> info, otherwise
    warning, or info for a near-tie (plan costs within `near_tie`, default 2%).
    Evidence carries both plans' costs, the scan nodes' costs and shared buffers,
    the medians, and the Bitmap Heap Scan's exact and lossy heap blocks.

    ## Why it matters
    sysbench read-only with 8000-row ranges lost 5-20% QPS from PostgreSQL 10
    to 11 and 17 because the planner switched the primary-key range from Index
    Scan to Bitmap Heap Scan. The cost model prices the bitmap's heap access
    as partly sequential and ignores the cache: when the range is already in
    shared buffers, building and rechecking the bitmap is overhead the Index Scan
    does not pay, and a lossy bitmap (work_mem too small) rechecks every row of
    its pages. The bitmap's prefetching (effective_io_concurrency) only pays
    off when the pages come from disk.

    ## Example
    sysbench simple_range (8000 rows), PG 10 -> PG 17:

        sbtest1: IndexScan(sbtest1_pkey) -> BitmapHeapScan(sbtest1_pkey); 1.12x
        slower (95% CI 1.08-1.16); near-tie (costs 28016.1 vs 27962.0)

    ## What to do
    Check whether the data is cached in production: if it is, a lower
    random_page_cost (or effective_cache_size that reflects the cache) makes the
    Index Scan win again. With lossy heap blocks, raise work_mem. Verify with
    EXPLAIN (ANALYZE, BUFFERS) and `SET enable_bitmapscan = off` on the candidate
    for this query only.

    ## References
    - Combining multiple indexes (bitmap scans):
      https://www.postgresql.org/docs/current/indexes-bitmap-scans.html
    - Planner method and cost settings (enable_*, random_page_cost):
      https://www.postgresql.org/docs/current/runtime-config-query.html
    - Resource settings (work_mem, effective_io_concurrency):
      https://www.postgresql.org/docs/current/runtime-config-resource.html
    - Using EXPLAIN: https://www.postgresql.org/docs/current/using-explain.html
    """
    if not comparison.plan_changed:
        return
    base_variant, cand_variant = comparison.baseline.dominant, comparison.candidate.dominant
    tie = _near_tie(comparison, float(options["near_tie"]))
    pairs = index_to_bitmap_pairs(accesses(base_variant.plan), accesses(cand_variant.plan))
    for old, new in pairs:
        old_node = node_at(base_variant.plan, old.path)
        new_node = node_at(cand_variant.plan, new.path)
        parts = [
            f"{old.relation}: {scan_text(short_name(old_node), old.index_name)}"
            f" -> {scan_text(short_name(new_node), new.index_name)}",
            comparison.timing.describe(),
        ]
        if tie.tied:
            parts.append(tie.text())
        if new_node.lossy_heap_blocks:
            parts.append(f"{new_node.lossy_heap_blocks} lossy heap blocks")
        evidence: dict[str, Any] = {
            "relation": old.relation,
            "from_node": old.node_type,
            "to_node": new.node_type,
            "index": old.index_name,
            "candidate_index": new.index_name,
            "baseline_path": old.path,
            "candidate_path": new.path,
            **tie.evidence(),
            "baseline_node_cost": old_node.total_cost,
            "candidate_node_cost": new_node.total_cost,
            "exact_heap_blocks": new_node.exact_heap_blocks,
            "lossy_heap_blocks": new_node.lossy_heap_blocks,
            "baseline_shared_hit": old_node.buffers.shared_hit,
            "baseline_shared_read": old_node.buffers.shared_read,
            "candidate_shared_hit": new_node.buffers.shared_hit,
            "candidate_shared_read": new_node.buffers.shared_read,
            **timing_evidence(comparison),
        }
        severity = flip_severity(comparison.timing.verdict, tie.tied)
        yield index_to_bitmap_scan.finding(comparison, "; ".join(parts), evidence, severity)
