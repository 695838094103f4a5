"""PS200 timing-regression: the measured verdict itself is `regressed`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, Severity, Verdict
from rules.base import rule
from rules.timing_messages import median_delta_ms, timing_message, verdict_evidence


@rule(
    "PS200",
    "timing-regression",
    "timing",
    Severity.ERROR,
    gate=lambda c, _: c.timing.verdict is Verdict.REGRESSED,
    min_delta_ms=0.0,
)
def timing_regression(comparison: QueryComparison, options: Mapping[str, Any]) -> Iterator[Finding]:
    """The candidate is measured slower: the timing verdict is `regressed`.

    ## What it flags
    A query whose timing comparison says `regressed` (README "How it
    decides"): the 95% confidence interval of the effect lies above 1
    (interleaved sides: the biweight t interval of the per-sample ratios;
    other sides: a bootstrap of the ratio of medians), the effect exceeds the
    minimum (default 10%) and the A/A noise floor, and the q-value across the
    comparison's queries is below 5%. Always an error. Too few samples or an
    overlapping interval is `inconclusive` and never fires. With `min_delta_ms`
    (default 0.0) a regression whose median grows by less than that many
    milliseconds is skipped (sub-millisecond queries in a CI gate).

    ## Why it matters
    This is the number the users feel. It is reported from the distributions
    (median, p90, CI), never from a lone mean: a few slow outliers move a mean
    and hide how the bulk of the executions behave. The message says whether
    the plan changed too: a slowdown with the same plan points at settings, I/O
    or the executor (effective_io_concurrency can change a bitmap scan's
    duration 4x while its cost stays the same), not the planner.

    ## Example
    sysbench simple_range (8000 rows), PG 10 -> PG 17:

        1.23x slower (95% CI 1.15-1.31), median 2.10 ms -> 2.60 ms,
        p90 2.40 ms -> 3.10 ms; plan changed (see PS100)

    ## What to do
    If the plan changed, start from the plan-flip findings. If not, compare the
    settings and the buffers (shared read versus hit) of both sides, and rerun
    with more samples if the interval is wide.

    ## References
    - EXPLAIN ANALYZE and its caveats:
      https://www.postgresql.org/docs/current/using-explain.html
    - pg_stat_statements:
      https://www.postgresql.org/docs/current/pgstatstatements.html
    """
    if comparison.timing.verdict is not Verdict.REGRESSED:
        return
    delta = median_delta_ms(comparison)
    if delta is not None and delta < float(options["min_delta_ms"]):
        return
    yield timing_regression.finding(
        comparison, timing_message(comparison), verdict_evidence(comparison)
    )
