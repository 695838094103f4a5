"""PS102 index-to-seq-scan: a large relation read by an index is read by Seq Scan."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from detector.model import Finding, Plan, QueryComparison, Severity, normalized_cost
from detector.model.fingerprint import short_name
from detector.model.units import fmt_count
from rules.base import rule
from rules.common import flip_context, fmt_cost, node_at
from rules.matching import placed_nodes
from rules.pairing import flipped_reads, scan_text

INDEXED_READS = ("Index Scan", "Index Only Scan", "Bitmap Heap Scan")
SEQ_SCAN = "Seq Scan"


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
    its duration is flat in the selectivity, an index read's grows with it.
    Measured on one table with random_page_cost 4, the two scans' costs cross at
    2.2% selectivity but their durations at 0.2%, so between the two the planner
    picks a Seq Scan that can be ~10x slower. A Seq Scan also pushes the hot set
    out of the cache for the other queries.

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

    ## References
    - Planner method and cost settings (enable_*, random_page_cost):
      https://www.postgresql.org/docs/current/runtime-config-query.html
    - Statistics used by the planner:
      https://www.postgresql.org/docs/current/planner-stats.html
    - Using EXPLAIN: https://www.postgresql.org/docs/current/using-explain.html
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
        yield index_to_seq_scan.finding(comparison, message, evidence, context.severity)
