"""PS600 unapproved-plan: plans checked against an approved-plans lock file (`planshift approve`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, Severity
from rules.base import rule


@rule(
    "PS600",
    "unapproved-plan",
    "baselines",
    Severity.ERROR,
    gate=lambda c, _: c.approved is not None,
)
def unapproved_plan(comparison: QueryComparison, options: Mapping[str, Any]) -> Iterator[Finding]:
    """The candidate used a plan shape that is not in the approved-plans file.

    ## What it flags
    With an approved-plans file (`--approved planshift.lock`, or `approved = ...`
    in planshift.toml), every plan shape the candidate used for a query (and
    sweep point) must be one of the fingerprints approved for it. Each shape that
    is not is flagged, with how many samples used it and the approved shapes.
    A query with no approved entry at all is flagged too: new queries need a
    reviewed plan. Without an approved-plans file the rule is silent.

    ## Why it matters
    This is the CI-gate counterpart of Oracle SQL Plan Management and Aurora
    Query Plan Management baselines: a plan change is a fact worth a review even
    when the clock cannot tell the difference yet, because flips live at
    boundaries (the same range query flips Index Scan <-> Bitmap Heap Scan as
    the range length or the statistics move) and today's harmless flip is
    tomorrow's regression at a larger data size.

    ## Example
    planshift.lock approves `Aggregate > IndexScan(sbtest1 sbtest1_pkey)` for
    sum_range; the candidate (random_page_cost 1.1 -> 4) uses:

        plan not approved: Aggregate > BitmapHeapScan(sbtest1) >
        BitmapIndexScan(sbtest1_pkey) (30/30 samples); approved:
        Aggregate > IndexScan(sbtest1 sbtest1_pkey)

    ## What to do
    Look at the plan change and its measured effect (PS100, PS200). If the new
    plan is right, accept it with `planshift approve --update` and commit the
    lock file's diff; if not, fix the cause (settings, statistics, an index)
    before merging.

    ## References
    - Using EXPLAIN: https://www.postgresql.org/docs/current/using-explain.html
    - auto_explain (plans from production):
      https://www.postgresql.org/docs/current/auto-explain.html
    """
    approved = comparison.approved
    if approved is None:
        return
    allowed = sorted(set(approved.values()))  # the lock file's, whichever plans the baseline ran
    for plan in comparison.candidate.plans:
        if plan.fingerprint in approved:
            continue
        known = (
            "; approved: " + " | ".join(allowed) if allowed else "; no plan approved for this query"
        )
        yield unapproved_plan.finding(
            comparison,
            f"plan not approved: {plan.signature} "
            f"({plan.samples}/{comparison.candidate.samples} samples){known}",
            {
                "fingerprint": plan.fingerprint,
                "signature": plan.signature,
                "samples": plan.samples,
                "approved": sorted(approved),
            },
        )
