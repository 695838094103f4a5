"""PS103 index-only-scan-lost: an Index Only Scan became an Index Scan or reads the heap."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, Plan, PlanNode, QueryComparison, ScanAccess, Severity
from detector.model.units import fmt_count
from rules.base import rule
from rules.common import flip_context, node_at
from rules.matching import accesses, facts
from rules.pairing import flipped_reads, pair_by_relation, scan_text

INDEX_ONLY = "Index Only Scan"


def _fetch_ratio(node: PlanNode) -> float | None:
    if node.heap_fetches is None or node.actual_rows_total is None:
        return None
    return node.heap_fetches / max(node.actual_rows_total, 1.0)


@rule(
    "PS103",
    "index-only-scan-lost",
    "plan-flip",
    Severity.WARNING,
    gate=lambda c, o: (
        c.plan_changed
        or facts(c.candidate.dominant.plan).max_heap_fetches >= int(o["min_heap_fetches"])
    ),
    near_tie=0.02,
    heap_fetch_ratio=0.2,
    min_heap_fetches=100,
    visibility_drop=0.3,
)
def index_only_scan_lost(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """An Index Only Scan became an Index Scan or now reads its rows from the heap.

    ## What it flags
    Three cases, one finding per relation read:

    - a relation read by Index Only Scan on the baseline is read by Index Scan
      on the candidate (paired by relation and index, not by position);
    - a relation read by Index Only Scan on the baseline is read another way on
      the candidate (a Bitmap Heap Scan, a Seq Scan under a Hash Join...) while
      the share of its pages the visibility map marks all-visible (pg_class
      relallvisible / relpages, recorded per side by `planshift run`) dropped by
      at least `visibility_drop` (default 0.3): the flip follows the table's
      state, not a setting;
    - the same Index Only Scan on both sides, but on the candidate its heap
      fetches reach `heap_fetch_ratio` (default 0.2) of the rows it returns and
      at least `min_heap_fetches` (default 100), where the baseline's stayed
      below the ratio.

    Severity follows the measured verdict like PS100 (near-tie within
    `near_tie`, default 2%, for the first case).

    ## Why it matters
    An Index Only Scan answers from the index alone for pages the visibility map
    marks all-visible; for every other row it reads the heap, like an Index Scan.
    Measured on one range, the index-only plan was 5.4x faster on a cold cache,
    because it avoids the random heap reads; a warm cache hides most of that, so a
    flip measured harmless on a warm benchmark can hurt in production. The
    visibility map is only set by VACUUM: a table that churns faster than
    autovacuum runs loses the benefit without any plan change.

    ## Example
    sbtest_ios after an UPDATE of the range, before VACUUM (PG 15, as captured):

        sbtest_ios: IndexOnlyScan(sbtest_ios_pkey) fetched 4268 heap tuples
        for 2000 rows (baseline 0): the visibility map does not cover these
        pages; 5.25x slower (95% CI 5.18-5.35)

    ## What to do
    VACUUM the table (or tune autovacuum for it: autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_insert_scale_factor) so the visibility map covers the
    pages. If the candidate chose an Index Scan, check that the index still
    covers every column the query reads and that enable_indexonlyscan is on;
    compare the buffers of the two scans (EXPLAIN (ANALYZE, BUFFERS)), preferably
    with a cold cache.

    ## References
    - Index-only scans and covering indexes:
      https://www.postgresql.org/docs/current/indexes-index-only-scans.html
    - Updating the visibility map (VACUUM):
      https://www.postgresql.org/docs/current/routine-vacuuming.html
    - Visibility map: https://www.postgresql.org/docs/current/storage-vm.html
    """
    base_plan = comparison.baseline.dominant.plan
    cand_plan = comparison.candidate.dominant.plan
    if comparison.plan_changed:
        for old, new in flipped_reads(comparison, (INDEX_ONLY,), ("Index Scan",)):
            old_node, new_node = node_at(base_plan, old.path), node_at(cand_plan, new.path)
            context = flip_context(comparison, float(options["near_tie"]))
            head = (
                f"{old.relation}: {scan_text('IndexOnlyScan', old.index_name)}"
                f" -> {scan_text('IndexScan', new.index_name)}"
            )
            facts = (
                f"every row now reads the heap (shared buffers "
                f"{old_node.buffers.shared_total} -> {new_node.buffers.shared_total}"
            )
            if old_node.heap_fetches is not None:
                facts += f"; baseline heap fetches {old_node.heap_fetches}"
            facts += ")"
            evidence = _evidence(old, new, old_node, new_node, context.evidence)
            message = "; ".join([f"{head}: {facts}", *context.tail])
            yield index_only_scan_lost.finding(comparison, message, evidence, context.severity)
        yield from _visibility_lost(comparison, options, base_plan, cand_plan)
    yield from _heap_fetches(comparison, options, base_plan, cand_plan)


def _visibility_lost(
    comparison: QueryComparison, options: Mapping[str, Any], base_plan: Plan, cand_plan: Plan
) -> Iterator[Finding]:
    """Index Only Scans gone (other than to an Index Scan) where the visibility map shrank."""
    cand = accesses(cand_plan)
    for old in (a for a in accesses(base_plan) if a.node_type == INDEX_ONLY):
        now = [a for a in cand if a.relation == old.relation]
        if any(a.node_type in (INDEX_ONLY, "Index Scan") for a in now):
            continue
        before = comparison.baseline.all_visible(old.relation)
        after = comparison.candidate.all_visible(old.relation)
        if before is None or after is None or before - after < float(options["visibility_drop"]):
            continue
        context = flip_context(comparison, float(options["near_tie"]))
        read = ", ".join(scan_text(a.node_type.replace(" ", ""), a.index_name) for a in now)
        message = (
            f"{old.relation}: {scan_text('IndexOnlyScan', old.index_name)} -> "
            f"{read or 'not read by a scan of its own'}: all-visible pages {before:.0%} -> "
            f"{after:.0%}: the visibility map no longer covers the table, so an index-only "
            "scan would read the heap (VACUUM sets it)"
        )
        evidence = {
            "relation": old.relation,
            "from_node": old.node_type,
            "to_nodes": [a.node_type for a in now],
            "index": old.index_name,
            "baseline_all_visible": before,
            "candidate_all_visible": after,
            **context.evidence,
        }
        message = "; ".join([message, *context.tail])
        yield index_only_scan_lost.finding(comparison, message, evidence, context.severity)


def _heap_fetches(
    comparison: QueryComparison, options: Mapping[str, Any], base_plan: Plan, cand_plan: Plan
) -> Iterator[Finding]:
    ratio_limit = float(options["heap_fetch_ratio"])
    least = int(options["min_heap_fetches"])
    if facts(cand_plan).max_heap_fetches < least:
        return
    before = [a for a in accesses(base_plan) if a.node_type == INDEX_ONLY]
    after = [a for a in accesses(cand_plan) if a.node_type == INDEX_ONLY]
    for old, new in pair_by_relation(before, after):
        old_node, new_node = node_at(base_plan, old.path), node_at(cand_plan, new.path)
        old_ratio, new_ratio = _fetch_ratio(old_node), _fetch_ratio(new_node)
        if old_ratio is None or new_ratio is None or new_node.heap_fetches is None:
            continue
        if new_ratio < ratio_limit or old_ratio >= ratio_limit:
            continue
        if new_node.heap_fetches < least:
            continue
        context = flip_context(comparison, None)
        head = (
            f"{new.relation}: {scan_text('IndexOnlyScan', new.index_name)} fetched "
            f"{new_node.heap_fetches} heap tuples for {fmt_count(new_node.actual_rows_total)} "
            f"rows (baseline {old_node.heap_fetches}): the visibility map does not cover "
            "these pages"
        )
        evidence = _evidence(old, new, old_node, new_node, context.evidence)
        evidence["candidate_heap_fetch_ratio"] = new_ratio
        evidence["baseline_heap_fetch_ratio"] = old_ratio
        message = "; ".join([head, *context.tail])
        yield index_only_scan_lost.finding(comparison, message, evidence, context.severity)


def _evidence(
    old: ScanAccess,
    new: ScanAccess,
    old_node: PlanNode,
    new_node: PlanNode,
    context: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "relation": old.relation,
        "from_node": old.node_type,
        "to_node": new.node_type,
        "index": old.index_name,
        "candidate_index": new.index_name,
        "baseline_path": old.path,
        "candidate_path": new.path,
        "baseline_heap_fetches": old_node.heap_fetches,
        "candidate_heap_fetches": new_node.heap_fetches,
        "baseline_shared_blocks": old_node.buffers.shared_total,
        "candidate_shared_blocks": new_node.buffers.shared_total,
        **context,
    }
