"""`--format markdown`: a compact pull-request comment.

A summary line with the gate's outcome, the server events of two windows of a log beside the
plan flips, a table of the queries that regressed, improved or changed plan, and one collapsible
`<details>` per query with its plan census, timings and findings. The first line is a hidden
marker, so a CI job can find and update its own comment.
"""

from __future__ import annotations

from markupsafe import escape

from detector.engine.comparison.plan_mix import mix_text
from detector.model import ComparisonResult, Finding, QueryComparison, Severity, Side, Verdict
from detector.model.units import fmt_count, fmt_ms, fmt_version
from detector.reports.common import (
    by_importance,
    condition_lines,
    failing_findings,
    findings_by_query,
    findings_of_failed,
    is_quiet,
    method_lines,
    not_compared_reason,
    production_lines,
    settings_text,
    slug,
    verdict_summary,
    worst_severities,
)
from detector.reports.comparison.events import EventRow, between, timeline
from detector.reports.comparison.notes import data_lines, failed_errors
from detector.reports.escape import (
    markdown_code,
    markdown_code_span,
    markdown_inline,
    single_line,
)

MARKER = "<!-- planshift-report -->"
MAX_DETAILS = 40  # GitHub comments stop at 65536 characters
MAX_ROWS = 80
VERDICT_ICON = {
    Verdict.REGRESSED: ":red_circle:",
    Verdict.IMPROVED: ":green_circle:",
    Verdict.UNCHANGED: ":white_circle:",
    Verdict.INCONCLUSIVE: ":grey_question:",
}


def cell_code(text: str) -> str:
    """Inline code in a table cell: GFM splits cells at every unescaped pipe, even in code."""
    return markdown_code_span(text).replace("|", "\\|")


def summary_text(text: str) -> str:
    """Text inside the raw HTML of `<summary>`: Markdown is not rendered there."""
    return str(escape(single_line(text)))


def _plan_cell(query: QueryComparison) -> str:
    base, cand = query.baseline.dominant.signature, query.candidate.dominant.signature
    if query.plan_changed:
        return f"{cell_code(base)} → {cell_code(cand)}"
    mix = mix_text(query)
    return f"same: {cell_code(base)}" + (f"<br>{markdown_inline(mix)}" if mix else "")


def _pair(base: float | None, cand: float | None) -> str:
    return f"{fmt_ms(base)} → {fmt_ms(cand)}"


def _headline(result: ComparisonResult, fail_on: Severity | None) -> list[str]:
    failing = failing_findings(result, fail_on)
    if failing:
        icon, gate = ":x:", f"**failed**: {len(failing)} findings at or above `{fail_on}`"
    elif fail_on is None:
        icon, gate = ":information_source:", "not gated (`--fail-on never`)"
    else:
        icon, gate = ":white_check_mark:", f"**passed**: no finding at or above `{fail_on}`"
    base_v, cand_v = result.versions
    lines = [
        MARKER,
        f"### {icon} planshift: {markdown_code_span(result.baseline)} → {markdown_code_span(result.candidate)}",
        "",
        f"Gate {gate}. {verdict_summary(result)}; {len(result.findings)} findings.",
        "",
        f"PostgreSQL {fmt_version(base_v)} → {fmt_version(cand_v)}, "
        f"run {', '.join(map(str, result.run_ids))}."
        + (
            " Settings that differ: "
            + ", ".join(markdown_code_span(s) for s in settings_text(result, "→"))
            + "."
            if result.settings_diff
            else ""
        ),
    ]
    # in the terminal's order and words
    notes = [
        *data_lines(result),
        *condition_lines(result),
        *production_lines(result),
        *method_lines(result),
    ]
    lines += ["", *(f"_{markdown_inline(line)}._" for line in notes)]
    return lines


def _events(result: ComparisonResult) -> list[str]:
    """Two windows of a log: the server events and the plan flips on one timeline."""
    rows = timeline(result)
    if not rows:
        return []
    lines = [
        "",
        "#### Server events and plan flips",
        "",
        "| when (UTC) | window | event | what | where |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        cells = [row.when, row.where, row.kind, row.text, row.at]
        lines.append("| " + " | ".join(markdown_inline(c) for c in cells) + " |")
    return lines


def _table(queries: list[QueryComparison], worst: dict[str, Severity]) -> list[str]:
    lines = [
        "",
        "| query | verdict | change | median ms | p90 ms | plan |",
        "|---|---|---|---|---|---|",
    ]
    for query in queries:
        base, cand = query.baseline.timing, query.candidate.timing
        severity = worst.get(query.label)
        verdict = f"{VERDICT_ICON[query.timing.verdict]} {query.timing.verdict.value}"
        if severity is not None:
            verdict += f" ({severity.value})"
        lines.append(
            "| "
            + " | ".join(
                [
                    f"[{markdown_inline(query.label)}](#{_anchor(query)})",
                    verdict,
                    markdown_inline(query.timing.describe()),
                    _pair(base.median_ms if base else None, cand.median_ms if cand else None),
                    _pair(base.p90_ms if base else None, cand.p90_ms if cand else None),
                    _plan_cell(query),
                ]
            )
            + " |"
        )
    return lines


def _anchor(query: QueryComparison) -> str:
    return "planshift-" + slug(query.label).lower()


def _census(side: Side) -> list[str]:
    rows = []
    for plan in side.plans:
        buffers = fmt_count(plan.median_shared_blocks)
        rows.append(
            f"| {markdown_inline(side.label)} | {plan.samples}/{side.samples} | "
            f"{fmt_ms(plan.median_ms)} | {plan.median_cost:,.1f} | {buffers} | "
            f"{cell_code(plan.signature)} |"
        )
    return rows


def _details(query: QueryComparison, findings: list[Finding], events: list[EventRow]) -> list[str]:
    base, cand = query.baseline.timing, query.candidate.timing
    flags = [query.timing.verdict.value, query.timing.describe()]
    mix = mix_text(query)
    if query.plan_changed:
        flags.append("plan changed")
    elif mix:
        flags.append("plan mix changed")
    lines = [
        "",
        f'<details><summary><a name="{_anchor(query)}"></a><b>{summary_text(query.label)}</b>: '
        f"{summary_text(', '.join(flags))}</summary>",
        "",
        markdown_code(query.sql.strip(), "sql"),
        "",
        *([f"**{markdown_inline(mix)}**", ""] if mix else []),
        "| side | plan samples | median ms | cost | shared buffers | plan |",
        "|---|---|---|---|---|---|",
        *_census(query.baseline),
        *_census(query.candidate),
        "",
    ]
    if base and cand:
        lines.append(
            f"Timings (n = {base.n} / {cand.n}): median {_pair(base.median_ms, cand.median_ms)} ms, "
            f"p90 {_pair(base.p90_ms, cand.p90_ms)} ms, p99 {_pair(base.p99_ms, cand.p99_ms)} ms, "
            f"max {_pair(base.max_ms, cand.max_ms)} ms."
        )
    if findings:
        lines.append("")
        lines.extend(_finding(f) for f in findings)
    if (query.plan_changed or mix) and events:
        change = "flip" if query.plan_changed else "plan mix change"
        lines += ["", f"Server events between the windows, before this {change}:", ""]
        lines += [f"- {markdown_inline(e.text)} ({markdown_inline(e.at)})" for e in events]
    lines += ["", "</details>"]
    return lines


def _finding(finding: Finding) -> str:
    return (
        f"- **{finding.severity.value}** {markdown_inline(finding.code)} "
        f"{markdown_inline(finding.name)}: {markdown_inline(finding.message)}"
    )


def render_markdown(result: ComparisonResult, *, fail_on: Severity | None) -> str:
    owned, _ = findings_by_query(result)
    worst = {result.queries[i].label: sev for i, sev in worst_severities(result).items()}
    notable = [result.queries[i] for i in by_importance(result) if not is_quiet(result.queries[i])]
    lines = _headline(result, fail_on) + _events(result)
    if notable:
        lines += _table(notable[:MAX_ROWS], worst)
        if len(notable) > MAX_ROWS:
            lines.append(f"| … {len(notable) - MAX_ROWS} more | | | | | |")
    quiet = len(result.queries) - len(notable)
    if quiet:
        kept = "query kept its plan" if quiet == 1 else "queries kept their plan"
        lines += ["", f"{quiet} {kept} and were measured unchanged."]
    index_of = {id(q): i for i, q in enumerate(result.queries)}
    shown = notable[:MAX_DETAILS]
    before = between(result)
    for query in shown:
        lines += _details(query, owned.get(index_of[id(query)], []), before)
    if len(notable) > len(shown):
        lines += ["", f"({len(notable) - len(shown)} more queries: see the HTML or JSON report.)"]
    of_failed, orphans = findings_of_failed(result)
    if result.failed:
        lines += ["", "Not compared (no execution worked on a side):", ""]
        for index, query in enumerate(result.failed):
            lines.append(f"- **{markdown_inline(query.label)}**: {not_compared_reason(query)}")
            lines.extend(
                f"  - {markdown_inline(side)}: {markdown_inline(text)}"
                for side, text in failed_errors(query)
            )
            lines.extend("  " + _finding(f) for f in of_failed.get(index, []))
    if orphans:
        lines += ["", "Other findings:", ""]
        lines.extend(_finding(f) for f in orphans)
    lines += ["", "<sub>planshift · impact = |median change| × executions</sub>", ""]
    return "\n".join(lines)
