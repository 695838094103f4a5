"""PS405 planning-time-regression: planning clearly slower on the candidate (medians, quartiles)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from detector.model import Finding, QueryComparison, Severity
from detector.model.samples import extremes
from detector.model.units import fmt_duration, fmt_ratio
from rules.base import rule
from rules.common import timing_evidence
from rules.gucs import changes_text, settings_changes, version_change


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def _may_regress(comparisons: Sequence[QueryComparison], options: Mapping[str, Any]) -> list[bool]:
    """The check's first two tests, for every comparison at once: enough planning times, and
    the candidate's slowest at least `min_delta_ms` above the baseline's fastest (NaN: open)."""
    need, delta = max(int(options["min_samples"]), 2), float(options["min_delta_ms"])
    base_n, base_low, _ = extremes([c.baseline.planning_ms for c in comparisons])
    cand_n, _, cand_high = extremes([c.candidate.planning_ms for c in comparisons])
    return [
        nb >= need and nc >= need and not high - low < delta
        for nb, nc, low, high in zip(base_n, cand_n, base_low, cand_high, strict=True)
    ]


@rule(
    "PS405",
    "planning-time-regression",
    "resources",
    Severity.WARNING,
    min_ratio=1.5,
    min_delta_ms=0.5,
    min_samples=5,
    each=_may_regress,
)
def planning_time_regression(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """Planning the query takes clearly longer on the candidate.

    ## What it flags
    With at least `min_samples` (default 5) planning times per side, the
    candidate's median planning time is at least `min_ratio` (default 1.5) times
    and `min_delta_ms` (default 0.5) milliseconds above the baseline's, and the
    two distributions do not overlap in their middle halves (the candidate's
    25th percentile is above the baseline's 75th). Medians and quartiles, not
    means: one slow planning (a cold catalog cache) does not make a regression.
    The message names differing join-search settings, a version change, and says
    when planning now takes longer than execution.

    ## Why it matters
    Planning time is paid on every execution of an unprepared statement, and for
    short OLTP queries it can exceed the execution. It grows steeply with the
    number of joined relations the planner searches exhaustively
    (join_collapse_limit, from_collapse_limit; geqo above geqo_threshold), with
    partitions that cannot be pruned at plan time, and with statistics targets.
    EXPLAIN ANALYZE and pg_stat_statements (track_planning) report it apart from
    execution, so an execution-time comparison misses it.

    ## Example
    A 10-way star join, join_collapse_limit 8 -> 12, the same plan (PG 15):

        planning 1.53 ms -> 8.99 ms median (5.87x; p25 8.82 ms above the
        baseline's p75 1.56 ms); from_collapse_limit 8 (default) -> 12,
        geqo_threshold 12 (default) -> 14, join_collapse_limit 8 (default) ->
        12; planning now takes longer than execution (median 0.633 ms)

    ## What to do
    Use prepared statements (or a pooler that keeps them) so plans are reused;
    keep join_collapse_limit / from_collapse_limit at their defaults unless the
    plans measurably improve; prune partitions at plan time (constants rather
    than parameters, or fewer partitions).

    ## References
    - Controlling the planner with explicit JOIN clauses:
      https://www.postgresql.org/docs/current/explicit-joins.html
    - Join search settings (join_collapse_limit):
      https://www.postgresql.org/docs/current/runtime-config-query.html
    - pg_stat_statements (track_planning):
      https://www.postgresql.org/docs/current/pgstatstatements.html
    - PREPARE: https://www.postgresql.org/docs/current/sql-prepare.html
    """
    base_ms, cand_ms = comparison.baseline.planning_ms, comparison.candidate.planning_ms
    if min(len(base_ms), len(cand_ms)) < max(int(options["min_samples"]), 2):
        return
    # the medians first: most queries stop here, before sorting out quartiles
    if max(cand_ms) - min(base_ms) < float(options["min_delta_ms"]):
        return
    base, cand = sorted(base_ms), sorted(cand_ms)
    b50, c50 = statistics.median(base), statistics.median(cand)
    if c50 - b50 < float(options["min_delta_ms"]) or c50 < float(options["min_ratio"]) * b50:
        return
    b25, b50, b75 = _quartiles(base)
    c25, c50, c75 = _quartiles(cand)
    if c25 <= b75:
        return
    ratio = c50 / b50 if b50 > 0 else None
    head = f"planning {fmt_duration(b50)} -> {fmt_duration(c50)} median"
    spread = f"p25 {fmt_duration(c25)} above the baseline's p75 {fmt_duration(b75)}"
    head += f" ({fmt_ratio(ratio)}x; {spread})" if ratio else f" ({spread})"
    parts = [head]
    search = [
        c
        for c in settings_changes(comparison.baseline, comparison.candidate)
        if c.category == "join search" or c.name == "default_statistics_target"
    ]
    if search:
        parts.append(changes_text(search))
    version = version_change(comparison.baseline, comparison.candidate)
    if version:
        parts.append(version)
    execution = comparison.candidate.timing
    if execution is not None and c50 > execution.median_ms:
        parts.append(
            f"planning now takes longer than execution (median {fmt_duration(execution.median_ms)})"
        )
    evidence: dict[str, Any] = {
        "baseline_planning_median_ms": b50,
        "candidate_planning_median_ms": c50,
        "baseline_planning_p25_ms": b25,
        "baseline_planning_p75_ms": b75,
        "candidate_planning_p25_ms": c25,
        "candidate_planning_p75_ms": c75,
        "planning_ratio": ratio,
        "baseline_planning_samples": len(base),
        "candidate_planning_samples": len(cand),
        "settings": [c.as_evidence() for c in search],
        **timing_evidence(comparison),
    }
    yield planning_time_regression.finding(comparison, "; ".join(parts), evidence)
