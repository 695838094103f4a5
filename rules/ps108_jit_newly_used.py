"""PS108 jit-newly-used: the candidate compiles the query with JIT, the baseline did not."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, Severity
from detector.model.units import fmt_duration
from rules.base import rule
from rules.common import flip_context
from rules.gucs import changes_text, settings_changes, side_settings


@rule(
    "PS108",
    "jit-newly-used",
    "plan-flip",
    Severity.WARNING,
    gate=lambda c, _: c.candidate.dominant.plan.jit_used and not c.baseline.dominant.plan.jit_used,
    min_jit_ms=0.0,
)
def jit_newly_used(comparison: QueryComparison, options: Mapping[str, Any]) -> Iterator[Finding]:
    """The candidate compiles the query with JIT and the baseline did not.

    ## What it flags
    The candidate's dominant plan reports JIT compilation (EXPLAIN's JIT section
    with at least one function) where the baseline's does not, with at least
    `min_jit_ms` (default 0.0) of JIT time. The message gives the JIT time
    against the execution time and the jit settings that differ. The plan shape
    can stay the same: JIT changes how it is executed. JIT lost is PS111.

    Severity follows the measured verdict like PS100: regressed -> error,
    improved -> info, otherwise warning.

    ## Why it matters
    JIT is switched on by plan cost (jit_above_cost, default 100000;
    jit_inline_above_cost and jit_optimize_above_cost, 500000), not by measured
    time. Compiling, inlining and optimizing take tens to hundreds of
    milliseconds, which only pays off for long analytic queries; an OLTP query
    whose estimate crosses the threshold (or a server where jit was turned on)
    pays the compile time on every execution. Builds without LLVM cannot JIT at
    all, so two servers of one version can differ.

    ## Example
    JIT on with every threshold at 0 on the candidate, the same plan (PG 15):

        JIT newly used: 43.6 ms compiling in a 102 ms execution (43%); jit
        settings: jit off -> on, jit_above_cost 100000 (default) -> 0,
        jit_inline_above_cost 500000 (default) -> 0, jit_optimize_above_cost
        500000 (default) -> 0; 1.43x slower (95% CI 1.39-1.46)

    ## What to do
    Raise jit_above_cost (and the inline/optimize thresholds) above the cost of
    your OLTP queries, or set jit = off for the workload; keep JIT for long
    reporting queries where the compile time is a small share.

    ## References
    - Just-in-time compilation: https://www.postgresql.org/docs/current/jit.html
    - When to JIT: https://www.postgresql.org/docs/current/jit-decision.html
    - JIT cost thresholds (jit_above_cost):
      https://www.postgresql.org/docs/current/runtime-config-query.html
    """
    base_plan = comparison.baseline.dominant.plan
    cand_plan = comparison.candidate.dominant.plan
    if not cand_plan.jit_used or base_plan.jit_used:
        return
    jit_ms = cand_plan.jit_total_ms
    if jit_ms is not None and jit_ms < float(options["min_jit_ms"]):
        return
    context = flip_context(comparison, None)
    head = "JIT newly used"
    if jit_ms is not None:
        head += f": {fmt_duration(jit_ms)} compiling"
        if cand_plan.execution_ms:
            share = 100 * jit_ms / cand_plan.execution_ms
            head += f" in a {fmt_duration(cand_plan.execution_ms)} execution ({share:.0f}%)"
    jit_settings = [
        c
        for c in settings_changes(comparison.baseline, comparison.candidate)
        if c.category == "jit"
    ]
    if jit_settings:
        head += f"; jit settings: {changes_text(jit_settings)}"
    evidence: dict[str, Any] = {
        "jit_total_ms": jit_ms,
        "candidate_execution_ms": cand_plan.execution_ms,
        "candidate_jit_settings": {
            k: v for k, v in side_settings(comparison.candidate).items() if k.startswith("jit")
        },
        **context.evidence,
    }
    yield jit_newly_used.finding(
        comparison, "; ".join([head, *context.tail]), evidence, context.severity
    )
