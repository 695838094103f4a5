"""The HTML report's per-query block: timings, plan census, latency CDF, findings, plan diff."""

from __future__ import annotations

from detector.model import ComparisonResult, Finding, QueryComparison, Side
from detector.model.units import fmt_ms
from detector.reports.charts import cdf_chart
from detector.reports.common import fmt_count, is_quiet, slug
from detector.reports.escape import for_html
from detector.reports.html_plan import plan_diff_table
from detector.reports.html_plan_json import json_controls


def anchor(query: QueryComparison) -> str:
    return "q-" + slug(query.label)


def badge(text: str, kind: str) -> str:
    return f'<span class="badge {kind}">{for_html(text)}</span>'


def _timings(query: QueryComparison) -> str:
    rows = []
    for side, css in ((query.baseline, "side-base"), (query.candidate, "side-cand")):
        t = side.timing
        cells = (
            [t.n, t.median_ms, t.p90_ms, t.p99_ms, t.min_ms, t.max_ms] if t else [0] + [None] * 5
        )
        numbers = "".join(
            f'<td class="num">{c if isinstance(c, int) else fmt_ms(c)}</td>' for c in cells
        )
        rows.append(f'<tr><td class="{css}">{for_html(side.label)}</td>{numbers}</tr>')
    head = "".join(f'<th class="num">{h}</th>' for h in ("n", "median", "p90", "p99", "min", "max"))
    return (
        f"<table><thead><tr><th>side (ms)</th>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _census(query: QueryComparison, element: str) -> str:
    """Every plan shape each side used; the dominant ones' JSON is in the plan diff's heading."""
    rows = []
    sides = (("baseline", query.baseline, "side-base"), ("candidate", query.candidate, "side-cand"))
    for role, side, css in sides:
        for plan in side.plans:
            if plan is side.dominant:
                json_cell = f'<a href="#{element}-diff">in the plan diff</a>'
            else:
                fingerprint = plan.fingerprint[:8]
                json_cell = json_controls(
                    plan.plan,
                    f"{element}-{role}-{fingerprint}-json",
                    f"{element}.{role}.{fingerprint}.json",
                )
            rows.append(
                f'<tr><td class="{css}">{for_html(side.label)}</td>'
                f'<td class="num">{plan.samples}/{side.samples}</td>'
                f'<td class="num">{fmt_ms(plan.median_ms)}</td>'
                f'<td class="num">{plan.median_cost:,.1f}</td>'
                f'<td class="num">{fmt_count(plan.median_shared_blocks)}</td>'
                f'<td class="sig">{for_html(plan.signature)}</td><td>{json_cell}</td></tr>'
            )
    return (
        '<table class="census"><thead><tr><th>side</th><th class="num">executions</th>'
        '<th class="num">median ms</th><th class="num">est. cost</th>'
        '<th class="num">shared buffers</th><th>plan shape</th><th>plan JSON</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody><caption>plan census: every shape each side used</caption></table>"
    )


def _several_shapes(side: Side) -> str:
    if len(side.plans) < 2:
        return ""
    return (
        f'<p class="note">{for_html(side.label)} used {len(side.plans)} plan shapes; the diff shows '
        f"the most frequent ({side.dominant.samples}/{side.samples}).</p>"
    )


def query_block(
    query: QueryComparison, findings: list[Finding], index: int, result: ComparisonResult
) -> str:
    """The query's block; `index` (its place in result.queries) makes its element ids unique."""
    verdict = query.timing.verdict.value
    badges = badge(verdict, f"v-{verdict}")
    if query.plan_changed:
        badges += badge("plan changed", "b-plan")
    for severity in sorted({f.severity for f in findings}, key=lambda s: -s.rank):
        count = sum(f.severity == severity for f in findings)
        badges += badge(f"{count} {severity.value}", f"s-{severity.value}")
    items = "".join(
        f"<li>{badge(f.severity.value, 's-' + f.severity.value)} <b>{for_html(f.code)} "
        f"{for_html(f.name)}</b>: {for_html(f.message)}</li>"
        for f in findings
    )
    open_attr = "" if is_quiet(query) and not findings else " open"
    return (
        f'<details class="query" id="{anchor(query)}"{open_attr}>'
        f"<summary><b>{for_html(query.label)}</b>{badges}"
        f'<span class="why">{for_html(query.timing.describe())}</span></summary>'
        f"<pre>{for_html(query.sql.strip())}</pre>"
        f'<div class="grid"><div>{_timings(query)}'
        + (f'<ul class="findings">{items}</ul>' if items else "")
        + f"</div><div>{cdf_chart(query, f'cdf{index}')}</div></div>"
        f"{_census(query, f'plan{index}')}"
        f'<h3 id="plan{index}-diff">Plan diff</h3>'
        f"{_several_shapes(query.baseline)}{_several_shapes(query.candidate)}"
        f"{plan_diff_table(query, result, f'plan{index}')}</details>"
    )
