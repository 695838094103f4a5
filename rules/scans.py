"""PS102-PS103 plan flips of how one relation is read: to a Seq Scan, off an Index Only Scan.

Scans pair by relation (and index), never by position; reads that stay the same on both
sides are set aside first (rules.plan_flip.unmatched).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from detector.model import (
    Finding,
    Plan,
    PlanNode,
    QueryComparison,
    ScanAccess,
    Severity,
    normalized_cost,
)
from detector.model.fingerprint import short_name
from rules.base import rule
from rules.common import emit, flip_context, fmt_cost, fmt_count, node_at
from rules.matching import accesses, facts, placed_nodes
from rules.plan_flip import pair_by_relation, scan_text, unmatched

INDEXED_READS = ("Index Scan", "Index Only Scan", "Bitmap Heap Scan")
SEQ_SCAN = "Seq Scan"
INDEX_ONLY = "Index Only Scan"


def flipped_reads(
    comparison: QueryComparison, old_types: tuple[str, ...], new_types: tuple[str, ...]
) -> list[tuple[ScanAccess, ScanAccess]]:
    """Baseline reads of `old_types` that became `new_types` reads of the same relation."""
    base = accesses(comparison.baseline.dominant.plan)
    cand = accesses(comparison.candidate.dominant.plan)
    before = [a for a in unmatched(base, cand) if a.node_type in old_types]
    after = [a for a in unmatched(cand, base) if a.node_type in new_types]
    return pair_by_relation(before, after)


@dataclass(frozen=True)
class ScanSize:
    """How much of a relation one execution of a scan reads."""

    rows: float  # rows read: returned + removed by filter (the row estimate if not executed)
    pages: float  # shared buffers hit + read; if not executed, its cost in seq_page_cost units
    measured: bool
    returned: float | None = None  # rows returned per execution, when measured


def scan_size(plan: Plan, path: str) -> ScanSize:
    """Rows and pages one execution of the scan at `path` reads.

    Per-loop figures times loops for a parallel scan (workers report per-worker rows), per
    loop for a scan repeated by a nested loop. A plan that was not executed (a generic plan,
    auto_explain without analyze) has estimates only: its rows, and its cost divided by
    seq_page_cost, which counts every page once plus a CPU charge per row (an upper bound).
    """
    placed = next(p for p in placed_nodes(plan) if p.path == path)
    node = placed.node
    if node.actual_rows is None or not node.actual_loops:
        try:
            page_cost = float(plan.settings.get("seq_page_cost", "1")) or 1.0
        except ValueError:
            page_cost = 1.0
        return ScanSize(node.plan_rows, normalized_cost(node.total_cost) / page_cost, False)
    per_loop = node.actual_rows + (node.rows_removed_by_filter or 0.0)
    loops = node.actual_loops
    if placed.gather is not None:
        executions = placed.gather.actual_loops or 1.0
        scale = loops / executions
    else:
        executions, scale = loops, 1.0
    pages = node.buffers.shared_total / executions
    return ScanSize(per_loop * scale, pages, True, node.actual_rows * scale)


@rule(
    "PS102",
    "index-to-seq-scan",
    "plan-flip",
    Severity.WARNING,
    near_tie=0.02,
    needs_plan_change=True,
    min_rows=10000,
    min_pages=1000,
)
def index_to_seq_scan(comparison: QueryComparison, options: Mapping[str, Any]) -> Iterator[Finding]:
    """A large relation read by an index on the baseline is read by Seq Scan now.

    ## What it flags
    For each relation, an Index Scan, Index Only Scan or Bitmap Heap Scan in the
    baseline's dominant plan that became a Seq Scan in the candidate's, when the
    Seq Scan reads a large relation: at least `min_rows` rows (default 10000:
    rows returned plus rows removed by the filter, per execution) or at least
    `min_pages` pages (default 1000 = 8 MB; shared buffers hit + read). A plan
    that was not executed is judged by the planner's estimates: its row
    estimate, and its cost in seq_page_cost units for the pages (an upper
    bound: it adds a CPU charge per row). Nodes pair by relation, not by
    position.

    Severity follows the measured verdict like PS100: regressed -> error,
    improved -> info, otherwise warning, or info for a near-tie (plan costs
    within `near_tie`, default 2%).

    ## Why it matters
    A Seq Scan reads every page of the relation whatever the predicate selects:
    its duration is flat in the selectivity, an index read's grows with it. Seed
    000: with random_page_cost 4 the two scans' costs cross at 2.2% selectivity
    but their durations at 0.2%, so between the two the planner picks a Seq Scan
    that can be ~10x slower. A Seq Scan also pushes the hot set out of the cache
    for the other queries.

    ## Example
    The sysbench range (2000 of 200000 rows), index scans disabled on the
    candidate (PG 15, as captured):

        sbtest1: IndexScan(sbtest1_pkey) -> SeqScan reading 200000 rows (7032
        pages) to return 2000; 29.59x slower (95% CI 28.95-30.17)

    ## What to do
    Compare the settings of the two sides (PS500): random_page_cost,
    effective_cache_size and enable_* move this choice. Check the row estimate of
    the scan (PS301): an over-estimate makes the Seq Scan look cheap. Refresh
    statistics with ANALYZE; if the index is still not used, check that it
    exists and is valid on the candidate.
    """
    if not comparison.plan_changed:
        return
    base_plan = comparison.baseline.dominant.plan
    cand_plan = comparison.candidate.dominant.plan
    for old, new in flipped_reads(comparison, INDEXED_READS, (SEQ_SCAN,)):
        size = scan_size(cand_plan, new.path)
        large = size.rows >= float(options["min_rows"]) or size.pages >= float(options["min_pages"])
        if not large:
            continue
        old_node, new_node = node_at(base_plan, old.path), node_at(cand_plan, new.path)
        context = flip_context(comparison, float(options["near_tie"]))
        if size.measured:
            reads = f"reading {fmt_count(size.rows)} rows ({fmt_count(round(size.pages))} pages)"
            reads += f" to return {fmt_count(size.returned)}"
        else:
            reads = (
                f"estimated at {fmt_count(size.rows)} rows, cost "
                f"{fmt_cost(size.pages)} (up to as many pages; not executed)"
            )
        head = f"{old.relation}: {scan_text(short_name(old_node), old.index_name)} -> SeqScan"
        evidence: dict[str, Any] = {
            "relation": old.relation,
            "from_node": old.node_type,
            "to_node": new.node_type,
            "index": old.index_name,
            "baseline_path": old.path,
            "candidate_path": new.path,
            "rows_read": size.rows,
            "pages_read": size.pages,
            "measured": size.measured,
            "baseline_node_cost": old_node.total_cost,
            "candidate_node_cost": new_node.total_cost,
            **context.evidence,
        }
        message = "; ".join([f"{head} {reads}", *context.tail])
        yield emit("PS102", comparison, message, evidence, context.severity)


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
)
def index_only_scan_lost(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """An Index Only Scan became an Index Scan or now reads its rows from the heap.

    ## What it flags
    Two cases, one finding per relation read:

    - a relation read by Index Only Scan on the baseline is read by Index Scan
      on the candidate (paired by relation and index, not by position);
    - the same Index Only Scan on both sides, but on the candidate its heap
      fetches reach `heap_fetch_ratio` (default 0.2) of the rows it returns and
      at least `min_heap_fetches` (default 100), where the baseline's stayed
      below the ratio.

    Severity follows the measured verdict like PS100 (near-tie within
    `near_tie`, default 2%, for the first case).

    ## Why it matters
    An Index Only Scan answers from the index alone for pages the visibility map
    marks all-visible; for every other row it reads the heap, like an Index Scan.
    Seed 004: on a cold cache the index-only plan was 5.4x faster, because it
    avoids the random heap reads; a warm cache hides most of that, so a flip
    measured harmless on a warm benchmark can hurt in production. The visibility
    map is only set by VACUUM: a table that churns faster than autovacuum runs
    loses the benefit without any plan change.

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
            yield emit("PS103", comparison, message, evidence, context.severity)
    yield from _heap_fetches(comparison, options, base_plan, cand_plan)


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
        yield emit(
            "PS103", comparison, "; ".join([head, *context.tail]), evidence, context.severity
        )


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
