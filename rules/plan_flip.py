"""PS1xx plan flips: the candidate runs the query with a different plan shape than the baseline."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, ScanAccess, Severity, scan_accesses
from detector.model.fingerprint import short_name
from rules.base import rule
from rules.common import (
    census,
    census_evidence,
    emit,
    flip_severity,
    fmt_cost,
    near_tie,
    node_at,
    timing_evidence,
)

INDEX_SCANS = ("Index Scan", "Index Only Scan")
BITMAP_HEAP_SCAN = "Bitmap Heap Scan"


def _near_tie(comparison: QueryComparison, threshold: float) -> tuple[bool, float, float]:
    return near_tie(comparison, threshold)


@rule(
    "PS100",
    "plan-shape-changed",
    "plan-flip",
    Severity.WARNING,
    near_tie=0.02,
    needs_plan_change=True,
)
def plan_shape_changed(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """The dominant plan shape differs between baseline and candidate.

    ## What it flags
    A query whose most frequent plan fingerprint on the candidate is not the
    baseline's. The fingerprint ignores constants, costs, row counts, timings and
    aliases, so only a different plan shape (scan type, join method or order,
    index, strategy) counts.

    Severity follows the measured timing verdict: regressed -> error, improved ->
    info, unchanged or inconclusive -> warning. When the two plans' total costs
    are within `near_tie` (relative, default 0.02 = 2%) of each other the flip is
    a near-tie: the planner sits at a switch point, and a near-tie that is not
    measured slower is info. When a side mixed several shapes, the message lists
    the census.

    ## Why it matters
    Plan flips are the commonest cause of sudden slowdowns after an upgrade or a
    settings change, and a flip is a fact even when the clock cannot tell yet.
    Near a switch point (seed 000: the cost crossover at 2.2% selectivity, the
    duration crossover at 0.2%) the choice changes with every ANALYZE sample and
    parameter value.

    ## Example
    Seed 003, simple_range (`SELECT c FROM sbtest1 WHERE id BETWEEN $1 AND $2`,
    8000 rows): PG 10 Index Scan (cost 28016.1) -> PG 17 Bitmap Heap Scan (cost
    27962.0):

        plan changed: IndexScan(sbtest1 sbtest1_pkey) -> BitmapHeapScan(sbtest1) >
        BitmapIndexScan(sbtest1_pkey); 1.12x slower (95% CI 1.08-1.16); near-tie
        (costs 28016.1 vs 27962.0)

    Measured slower, so an error despite the near-tie.

    ## What to do
    Look at the more specific plan-flip findings (PS101 ...) for the node that
    changed. If the candidate is slower, compare the settings of both sides
    (random_page_cost, effective_io_concurrency, work_mem) and refresh statistics
    (ANALYZE) before blaming the version; pin the old plan only as a stopgap
    (pg_hint_plan, per-query SET).
    """
    if not comparison.plan_changed:
        return
    base_variant, cand_variant = comparison.baseline.dominant, comparison.candidate.dominant
    near_tie, base_cost, cand_cost = _near_tie(comparison, float(options["near_tie"]))
    parts = [
        f"plan changed: {base_variant.signature} -> {cand_variant.signature}",
        comparison.timing.describe(),
    ]
    if near_tie:
        parts.append(f"near-tie (costs {fmt_cost(base_cost)} vs {fmt_cost(cand_cost)})")
    for who, side in (("baseline", comparison.baseline), ("candidate", comparison.candidate)):
        mixed = census(side, who)
        if mixed:
            parts.append(mixed)
    evidence: dict[str, Any] = {
        "baseline_fingerprint": base_variant.fingerprint,
        "candidate_fingerprint": cand_variant.fingerprint,
        "baseline_signature": base_variant.signature,
        "candidate_signature": cand_variant.signature,
        "baseline_cost": base_cost,
        "candidate_cost": cand_cost,
        "near_tie": near_tie,
        "baseline_plans": census_evidence(comparison.baseline),
        "candidate_plans": census_evidence(comparison.candidate),
        **timing_evidence(comparison),
    }
    severity = flip_severity(comparison.timing.verdict, near_tie)
    yield emit("PS100", comparison, "; ".join(parts), evidence, severity)


def unmatched(accesses: list[ScanAccess], others: list[ScanAccess]) -> list[ScanAccess]:
    """Accesses with no same (relation, node type, index) counterpart on the other side."""
    pool = [(a.relation, a.node_type, a.index_name) for a in others]
    left: list[ScanAccess] = []
    for access in accesses:
        key = (access.relation, access.node_type, access.index_name)
        if key in pool:
            pool.remove(key)
        else:
            left.append(access)
    return left


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


def pair_by_relation(
    before: list[ScanAccess], after: list[ScanAccess]
) -> list[tuple[ScanAccess, ScanAccess]]:
    """Each `before` read takes an `after` read of its relation, one on its index if any."""
    pool = list(after)
    pairs: list[tuple[ScanAccess, ScanAccess]] = []
    for old in before:
        same = [new for new in pool if new.relation == old.relation]
        if not same:
            continue
        indexed = [new for new in same if old.index_name in (new.index_name or "").split(",")]
        new = (indexed or same)[0]
        pool.remove(new)
        pairs.append((old, new))
    return pairs


def scan_text(name: str, index: str | None) -> str:
    return f"{name}({index})" if index else name


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
    Seed 003: sysbench `read-only_range=8000` lost 5-20% QPS from PostgreSQL 10 to
    11 and 17 because the planner switched the 8000-row primary-key range from
    Index Scan to Bitmap Heap Scan. The cost model prices the bitmap's heap access
    as partly sequential and ignores the cache: when the range is already in
    shared buffers, building and rechecking the bitmap is overhead the Index Scan
    does not pay, and a lossy bitmap (work_mem too small) rechecks every row of
    its pages. The bitmap's prefetching (seed 001) only pays off when the pages
    come from disk.

    ## Example
    Seed 003, simple_range, PG 10 -> PG 17:

        sbtest1: IndexScan(sbtest1_pkey) -> BitmapHeapScan(sbtest1_pkey); 1.12x
        slower (95% CI 1.08-1.16); near-tie (costs 28016.1 vs 27962.0)

    ## What to do
    Check whether the data is cached in production: if it is, a lower
    random_page_cost (or effective_cache_size that reflects the cache) makes the
    Index Scan win again. With lossy heap blocks, raise work_mem. Verify with
    EXPLAIN (ANALYZE, BUFFERS) and `SET enable_bitmapscan = off` on the candidate
    for this query only.
    """
    if not comparison.plan_changed:
        return
    base_variant, cand_variant = comparison.baseline.dominant, comparison.candidate.dominant
    near_tie, base_cost, cand_cost = _near_tie(comparison, float(options["near_tie"]))
    pairs = index_to_bitmap_pairs(
        scan_accesses(base_variant.plan), scan_accesses(cand_variant.plan)
    )
    for old, new in pairs:
        old_node = node_at(base_variant.plan, old.path)
        new_node = node_at(cand_variant.plan, new.path)
        parts = [
            f"{old.relation}: {scan_text(short_name(old_node), old.index_name)}"
            f" -> {scan_text(short_name(new_node), new.index_name)}",
            comparison.timing.describe(),
        ]
        if near_tie:
            parts.append(f"near-tie (costs {fmt_cost(base_cost)} vs {fmt_cost(cand_cost)})")
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
            "baseline_cost": base_cost,
            "candidate_cost": cand_cost,
            "baseline_node_cost": old_node.total_cost,
            "candidate_node_cost": new_node.total_cost,
            "near_tie": near_tie,
            "exact_heap_blocks": new_node.exact_heap_blocks,
            "lossy_heap_blocks": new_node.lossy_heap_blocks,
            "baseline_shared_hit": old_node.buffers.shared_hit,
            "baseline_shared_read": old_node.buffers.shared_read,
            "candidate_shared_hit": new_node.buffers.shared_hit,
            "candidate_shared_read": new_node.buffers.shared_read,
            **timing_evidence(comparison),
        }
        severity = flip_severity(comparison.timing.verdict, near_tie)
        yield emit("PS101", comparison, "; ".join(parts), evidence, severity)
