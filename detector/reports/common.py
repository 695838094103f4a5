"""What every text report needs from a ComparisonResult: numbers, ranking, grouping, ownership.

Findings carry the query key and the sweep point, so each belongs to one query comparison.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from detector.engine.comparison.plan_mix import mix_text
from detector.model import ComparisonResult, Finding, QueryComparison, Severity, Verdict
from detector.model.build import describe
from detector.model.units import counted, fmt_version
from detector.model.workload import TIMING_MODES
from detector.reports.comparison.host_lines import host_lines
from detector.reports.escape import single_line


def fmt_number(value: float) -> str:
    """A parameter value or crossing: 681, 2,250, 0.35, 12.5k is not used (exact enough to act on)."""
    if abs(value) >= 100:
        return f"{round(value):,}"
    return f"{value:.3g}"


def fmt_tick(value: float) -> str:
    """A compact axis label: 300, 3k, 30k, 1.5M."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def slug(text: str) -> str:
    """An HTML id / anchor from a query label: `sweep_sum [n=100]` -> `sweep_sum-n-100`."""
    return re.sub(r"[^A-Za-z0-9_]+", "-", text).strip("-") or "query"


def is_quiet(query: QueryComparison) -> bool:
    """Same plans and measured unchanged: collapsed or left out of short reports. An
    inconclusive query is shown, with its effect and what would decide it; so is a query whose
    plan mix moved under the same dominant plan (`plan_mix`)."""
    return (
        not query.plan_changed
        and query.timing.verdict is Verdict.UNCHANGED
        and mix_text(query) is None
    )


def condition_text(conditions: Mapping[str, Any]) -> str:
    """`checksums off, io_method worker, timing EXPLAIN ANALYZE, TIMING OFF, cache cold (...)`."""
    parts = []
    if "data_checksums" in conditions:
        parts.append(f"checksums {conditions['data_checksums']}")
    if "io_method" in conditions:
        parts.append(f"io_method {conditions['io_method']}")
    if "timing" in conditions:
        parts.append(f"timing: {TIMING_MODES.get(conditions['timing'], conditions['timing'])}")
    cache = conditions.get("cache") or {}
    if cache.get("mode") == "cold":
        parts.append(
            f"cache cold (shared buffers {cache.get('shared_buffers')}, OS page cache "
            f"{cache.get('os_page_cache')})"
        )
    elif cache:
        parts.append("cache warm")
    return ", ".join(parts)


def condition_lines(result: ComparisonResult) -> list[str]:
    """One line per side on how it was measured (one when both sides were measured alike), and
    the build of both sides (detector.model.build) when recorded."""
    base = condition_text(result.conditions.get("baseline") or {})
    cand = condition_text(result.conditions.get("candidate") or {})
    build = result.conditions.get("build")
    built = [f"build: {build['summary']}"] if build else []
    if build and not build["same"]:  # each side's build, beside what differs
        named = ((result.baseline, "baseline"), (result.candidate, "candidate"))
        sides = "; ".join(
            f"{name}: {describe((result.conditions.get(role) or {}).get('build') or {})}"
            for name, role in named
        )
        built[0] += f" ({sides})"
    after = [*built, *host_lines(result)]
    if not base and not cand:
        return after
    if base == cand:
        return [f"measured: {base}", *after]
    return [f"measured {result.baseline}: {base}", f"measured {result.candidate}: {cand}", *after]


def production_lines(result: ComparisonResult) -> list[str]:
    """A captured workload: its coverage and production's settings, and each side that runs
    settings production does not (detector/engine/comparison/production.py)."""
    lines: list[str] = []
    for role, name in (("baseline", result.baseline), ("candidate", result.candidate)):
        facts = (result.conditions.get(role) or {}).get("production")
        if not facts:
            continue
        if not lines:
            settings = ", ".join(f"{k} {v}" for k, v in sorted(facts["settings"].items()))
            lines.append(
                f"production (planshift capture): {facts.get('coverage') or 'coverage unknown'}"
                f"; its settings, on every side: {settings or 'none beyond the defaults'}"
            )
        if facts["departures"]:
            shown = ", ".join(f"{k} {v}" for k, v in facts["departures"].items())
            lines.append(f"{name} runs settings production does not: {shown}")
    return [single_line(line) for line in lines]  # the values come from a workload file


def method_lines(result: ComparisonResult) -> list[str]:
    """How the timings were compared, and what that means for trusting the verdicts."""
    decided = sum(q.timing.verdict in (Verdict.REGRESSED, Verdict.IMPROVED) for q in result.queries)
    tested = sum(q.timing.q_value is not None for q in result.queries)
    lines = [] if result.not_comparable is None else [result.not_comparable]
    timed = any(q.baseline.timing and q.candidate.timing for q in result.queries)
    if result.interleaved and timed:  # plans only (run --plan-only): no timings to pair
        lines.append(
            "timings: paired, sample by sample (both sides ran in one interleaved run with the "
            "same parameters)"
        )
    elif tested:
        lines.append(
            "timings: two independent samples: the sides were not measured in one interleaved "
            "run, so drift between them (load, cache, another day) can pass for a change; run "
            "both in one `planshift run` for paired statistics"
        )
    if tested:
        lines.append(
            f"false discoveries controlled at {result.alpha:.0%} across "
            f"{counted(tested, 'query', 'queries')} "
            f"(Benjamini-Hochberg): about {result.alpha * decided:.2g} of the {decided} "
            "regressed/improved verdicts may be false alarms"
        )
    return lines


def impact_ms(query: QueryComparison) -> float:
    """Workload impact: |median delta| x executions (pg_stat_statements calls when known, else samples)."""
    return abs(query.impact_ms or 0.0)


def findings_by_query(result: ComparisonResult) -> tuple[dict[int, list[Finding]], list[Finding]]:
    """Findings per index into result.queries (by query and sweep point), and the others."""
    index = {(q.query_key, q.point): i for i, q in enumerate(result.queries)}
    owned: dict[int, list[Finding]] = {}
    orphans: list[Finding] = []
    for finding in result.findings:
        position = index.get((finding.query_key, finding.point))
        if position is None:
            orphans.append(finding)
        else:
            owned.setdefault(position, []).append(finding)
    return owned, orphans


def findings_of_failed(
    result: ComparisonResult,
) -> tuple[dict[int, list[Finding]], list[Finding]]:
    """The findings of the queries not compared (per index into result.failed: they failed on
    a side), and the findings that belong to no query at all."""
    _, orphans = findings_by_query(result)
    index = {(q.query_key, q.point): i for i, q in enumerate(result.failed)}
    owned: dict[int, list[Finding]] = {}
    rest: list[Finding] = []
    for finding in orphans:
        position = index.get((finding.query_key, finding.point))
        if position is None:
            rest.append(finding)
        else:
            owned.setdefault(position, []).append(finding)
    return owned, rest


def not_compared_reason(query: QueryComparison) -> str:
    """`no execution worked on pg17`: why a query of result.failed was not compared."""
    sides = [side.label for side in (query.baseline, query.candidate) if not side.plans]
    return f"no execution worked on {' and '.join(sides)}"


def worst_severities(result: ComparisonResult) -> dict[int, Severity]:
    """The worst finding's severity per index into result.queries (queries with findings)."""
    owned, _ = findings_by_query(result)
    return {
        index: max((f.severity for f in findings), key=lambda s: s.rank)
        for index, findings in owned.items()
    }


def by_importance(result: ComparisonResult) -> list[int]:
    """Indices into result.queries, most important first: the worst finding's severity, then
    the workload impact, then the label (what a reader should look at first)."""
    worst = worst_severities(result)
    return sorted(
        range(len(result.queries)),
        key=lambda i: (
            -(worst[i].rank if i in worst else -1),
            -impact_ms(result.queries[i]),
            result.queries[i].label,
        ),
    )


def ranked_findings(
    result: ComparisonResult,
) -> list[tuple[float, Finding, QueryComparison | None]]:
    """Findings by workload impact of their query (largest first), then severity, then name."""
    owned, orphans = findings_by_query(result)
    rows = [
        (impact_ms(result.queries[i]), finding, result.queries[i])
        for i, findings in owned.items()
        for finding in findings
    ]
    rows.sort(key=lambda row: (-row[0], *row[1].sort_key(), row[2].label if row[2] else ""))
    return rows + [(0.0, finding, None) for finding in orphans]


def rule_counts(result: ComparisonResult) -> list[tuple[str, str, Severity, int]]:
    """(code, name, worst severity, count) per rule, by code."""
    counts = Counter(f.code for f in result.findings)
    rows = []
    for code in sorted(counts):
        of_rule = [f for f in result.findings if f.code == code]
        worst = max((f.severity for f in of_rule), key=lambda s: s.rank)
        rows.append((code, of_rule[0].name, worst, counts[code]))
    return rows


def failing_findings(result: ComparisonResult, fail_on: Severity | None) -> list[Finding]:
    """Findings at or above --fail-on (none when the gate is off)."""
    if fail_on is None:
        return []
    return [f for f in result.findings if f.severity.rank >= fail_on.rank]


def title(result: ComparisonResult) -> str:
    base_v, cand_v = result.versions
    return (
        f"{result.baseline} (PostgreSQL {fmt_version(base_v)}) vs "
        f"{result.candidate} (PostgreSQL {fmt_version(cand_v)})"
    )


def settings_text(result: ComparisonResult, arrow: str = "->") -> list[str]:
    return [
        f"{name} {left if left is not None else 'n/a'} {arrow} "
        f"{right if right is not None else 'n/a'}"
        for name, (left, right) in sorted(result.settings_diff.items())
    ]


def verdict_summary(result: ComparisonResult) -> str:
    counts = result.verdict_counts()
    parts = [f"{n} {verdict}" for verdict, n in counts.items() if n]
    changed = sum(q.plan_changed for q in result.queries)
    compared = counted(len(result.queries), "query", "queries")
    text = f"{compared} compared ({', '.join(parts) or 'none'})"
    text = f"{text}, {counted(changed, 'plan change')}"
    if result.failed:
        text += f"; {len(result.failed)} not compared (no execution worked on a side: PS700)"
    return text
