"""PS201 timing-improvement: the measured verdict is `improved`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, Severity, Verdict
from rules.base import rule
from rules.common import fmt_cost, plan_cost, relative_gap
from rules.timing_messages import clock_hint, timing_message, verdict_evidence

SAME_COST = 0.05  # PS201 names clock-only settings when the costs are this close


@rule(
    "PS201",
    "timing-improvement",
    "timing",
    Severity.INFO,
    gate=lambda c, _: c.timing.verdict is Verdict.IMPROVED,
)
def timing_improvement(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """The candidate is measured faster: the timing verdict is `improved`.

    ## What it flags
    A query whose timing comparison says `improved`: the confidence interval of
    the median ratio lies below 1 and the effect exceeds the minimum and the noise
    floor. Always info; it never fails a CI gate. With the same plan at the same
    cost it names what moved the clock as PS202 does (the differing I/O, JIT,
    memory and parallelism settings, the version, more blocks read, I/O time).

    ## Why it matters
    An upgrade or a settings change is judged by its wins as well as its losses,
    and an improvement that comes with a plan flip shows which plan the candidate
    should keep.

    ## Example
    `effective_io_concurrency` 1 -> 100, a Bitmap Heap Scan over uncached pages:

        3.68x faster (95% CI 0.26-0.29), median 65604 ms -> 17807 ms,
        p90 66010 ms -> 18120 ms; same plan

    ## What to do
    Nothing is required. Keep the change; if it came with a plan flip, note the
    plan so a later flip back is recognised as a regression.

    ## References
    - EXPLAIN ANALYZE and its caveats:
      https://www.postgresql.org/docs/current/using-explain.html
    - I/O settings (effective_io_concurrency, io_method):
      https://www.postgresql.org/docs/current/runtime-config-resource.html
    """
    if comparison.timing.verdict is not Verdict.IMPROVED:
        return
    message, evidence = timing_message(comparison), verdict_evidence(comparison)
    base_cost = plan_cost(comparison.baseline.dominant)
    cand_cost = plan_cost(comparison.candidate.dominant)
    if not comparison.plan_changed and relative_gap(base_cost, cand_cost) <= SAME_COST:
        hint, named = clock_hint(comparison)
        message += f" and cost ({fmt_cost(base_cost)} vs {fmt_cost(cand_cost)}); {hint}"
        evidence["settings"] = [c.as_evidence() for c in named]
    yield timing_improvement.finding(comparison, message, evidence)
