"""`--format html`: one self-contained page (inline CSS, JS and SVG charts; works offline).

Sections: summary (the gate, one row per query that regressed, improved, is inconclusive or
changed plan, most important first; targets, settings that differ, findings by rule and ranked
by workload impact), sweeps (cost and duration per plan against the parameter with their
crossings, and the plan-shape census as a plan diagram), and one block per query (latency CDF of
both sides, plan census, findings, and the plan diff).
"""

from __future__ import annotations

from detector.model import ComparisonResult, Severity, Side
from detector.model.units import fmt_ms, fmt_version
from detector.reports.census_html import DIAGRAM_NOTE, diagram_svg, grid_from_sweep
from detector.reports.charts import sweep_chart
from detector.reports.common import (
    SweepGroup,
    by_importance,
    condition_text,
    failing_findings,
    findings_by_query,
    fmt_number,
    is_quiet,
    method_lines,
    ranked_findings,
    rule_counts,
    settings_text,
    sweep_groups,
    title,
    verdict_summary,
    worst_severities,
)
from detector.reports.escape import for_html
from detector.reports.host_lines import host_lines
from detector.reports.html_assets import CSS, JS, csp
from detector.reports.html_query import anchor, badge, query_block
from detector.reports.sweeps import analyze, cost_settings_differ
from detector.version import __version__

TOP_FINDINGS = 25
CENSUS_NOTE = (
    "This is the census of the comparison's two sides; across many targets (versions x "
    "settings x sweep points) see `planshift census`."
)


def _table(head: list[str], rows: list[list[str]], numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    th = "".join(f"<th{' class=num' if i in numeric else ''}>{h}</th>" for i, h in enumerate(head))
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=num' if i in numeric else ''}>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _targets(result: ComparisonResult) -> str:
    rows = []
    pairs: list[tuple[str, str, Side | None]] = [
        ("baseline", result.baseline, None),
        ("candidate", result.candidate, None),
    ]
    if result.queries:
        first = result.queries[0]
        pairs = [
            ("baseline", result.baseline, first.baseline),
            ("candidate", result.candidate, first.candidate),
        ]
    for (role, name, side), version in zip(pairs, result.versions, strict=True):
        gucs = ", ".join(f"{k}={v}" for k, v in sorted(side.settings.items())) if side else ""
        css = "side-base" if role == "baseline" else "side-cand"
        measured = condition_text(result.conditions.get(role) or {})
        rows.append(
            [
                role,
                f'<span class="{css}">{for_html(name)}</span>',
                fmt_version(version),
                f"<code>{for_html(gucs) or '-'}</code>",
                for_html(measured) or "-",
            ]
        )
    notes = "".join(
        f"<p>{for_html(line)}</p>" for line in [*host_lines(result), *method_lines(result)]
    )
    return _table(["side", "target", "PostgreSQL", "variant settings", "measured"], rows) + notes


def _pair(base: float | None, cand: float | None) -> str:
    return f"{fmt_ms(base)} → {fmt_ms(cand)}"


def _query_table(result: ComparisonResult) -> str:
    """One row per query that regressed, improved, is inconclusive or changed plan, most
    important first (the Markdown report's table); the quiet ones are counted."""
    worst = worst_severities(result)
    order = [i for i in by_importance(result) if not is_quiet(result.queries[i])]
    rows = []
    for i in order:
        query = result.queries[i]
        base, cand = query.baseline.timing, query.candidate.timing
        verdict = query.timing.verdict.value
        badges = badge(verdict, f"v-{verdict}")
        if i in worst:
            badges += badge(worst[i].value, f"s-{worst[i].value}")
        signatures = (query.baseline.dominant.signature, query.candidate.dominant.signature)
        plan = (
            f"<code>{for_html(signatures[0])}</code> → <code>{for_html(signatures[1])}</code>"
            if query.plan_changed
            else f"same: <code>{for_html(signatures[0])}</code>"
        )
        rows.append(
            [
                f'<a href="#{anchor(query)}">{for_html(query.label)}</a>',
                badges,
                for_html(query.timing.describe()),
                _pair(base.median_ms if base else None, cand.median_ms if cand else None),
                _pair(base.p90_ms if base else None, cand.p90_ms if cand else None),
                plan,
            ]
        )
    quiet = len(result.queries) - len(order)
    note = (
        f'<p class="note">{quiet} {"query" if quiet == 1 else "queries"} kept the plan and '
        "measured unchanged (collapsed under Queries).</p>"
        if quiet
        else ""
    )
    if not rows:
        return note
    head = ["query", "verdict", "change", "median ms", "p90 ms", "plan"]
    return _table(head, rows, {3, 4}).replace("<table>", '<table class="at-a-glance">', 1) + note


def _summary(result: ComparisonResult, fail_on: Severity | None) -> str:
    failing = failing_findings(result, fail_on)
    if fail_on is None:
        gate = "<p>Gate off (<code>--fail-on never</code>).</p>"
    elif failing:
        gate = (
            f'<p class="gate-fail">Gate fails: {len(failing)} findings at or above '
            f"<code>{fail_on.value}</code>.</p>"
        )
    else:
        gate = f'<p class="gate-pass">Gate passes: no finding at or above <code>{fail_on.value}</code>.</p>'
    parts = [
        '<section id="summary"><h2>Summary</h2>',
        gate,
        f"<p>{for_html(verdict_summary(result))}; {len(result.findings)} findings.</p>",
        _query_table(result),
        "<h3>Targets</h3>",
        _targets(result),
    ]
    if result.settings_diff:
        rows = [
            [f"<code>{for_html(k)}</code>", for_html(a or "default"), for_html(b or "default")]
            for k, (a, b) in sorted(result.settings_diff.items())
        ]
        parts += [
            "<h3>Settings that differ</h3>",
            _table(["setting", "baseline", "candidate"], rows),
        ]
    if result.findings:
        rows = [
            [for_html(code), for_html(name), badge(sev.value, f"s-{sev.value}"), str(n)]
            for code, name, sev, n in rule_counts(result)
        ]
        parts += [
            "<h3>Findings by rule</h3>",
            _table(["rule", "name", "worst", "count"], rows, {3}),
        ]
        ranked = []
        everything = ranked_findings(result)
        for impact, finding, query in everything[:TOP_FINDINGS]:
            where = (
                f'<a href="#{anchor(query)}">{for_html(query.label)}</a>'
                if query
                else for_html(finding.query_name)
            )
            ranked.append(
                [
                    fmt_ms(impact),
                    badge(finding.severity.value, f"s-{finding.severity.value}"),
                    for_html(finding.code),
                    where,
                    for_html(finding.message),
                ]
            )
        parts += [
            "<h3>Findings by workload impact</h3>",
            '<p class="note">impact = |median change| x executions (ms of the measured workload)</p>',
            _table(["impact ms", "severity", "rule", "query", "message"], ranked, {0}),
        ]
        if len(everything) > TOP_FINDINGS:
            rest = len(everything) - TOP_FINDINGS
            parts.append(f'<p class="note">{rest} more findings are listed with their queries.</p>')
    parts.append("</section>")
    return "".join(parts)


def _sweep(group: SweepGroup, index: int, result: ComparisonResult) -> str:
    analysis = analyze(group)
    facts = []
    for switch in analysis.switches:
        facts.append(
            f"<b>{for_html(switch.side)}</b> switches plan between {for_html(group.param)}="
            f"{for_html(switch.after)} and {for_html(switch.before)}: <code>{for_html(switch.old)}"
            f"</code> → <code>{for_html(switch.new)}</code>"
        )
    for name, found in (
        ("costs", analysis.cost_crossings),
        ("durations", analysis.duration_crossings),
    ):
        where = (
            ", ".join(f"{for_html(group.param)}≈{fmt_number(x)}" for x in found)
            or "nowhere in the measured range"
        )
        facts.append(f"the {name} of the two sides cross {where}")
    unit = cost_settings_differ(list(result.settings_diff))
    caveat = (
        f"Cost settings differ ({', '.join(unit)}): the sides' costs are in different units, so "
        "only the duration crossing is a fact; compare forced-plan variants under the same "
        "settings to see where the planner's costs cross."
        if unit
        else "Both sides cost plans with the same cost settings: between the cost crossing (where the "
        "planner switches) and the duration crossing (where the clock does) it picks the slower plan."
    )
    return (
        f'<h3 id="sweep-{index}">{for_html(group.name)}: {len(group.points)} points of {for_html(group.param)}</h3>'
        f"<ul>{''.join(f'<li>{f}</li>' for f in facts)}</ul>"
        f"{sweep_chart(group, analysis, f'sweep{index}')}"
        f'<p class="note">{for_html(caveat)}</p>'
        f"<h3>Plan-shape census: {for_html(group.name)}</h3>"
        f"{diagram_svg(grid_from_sweep(group), f'census{index}')}"
        f'<p class="note">{for_html(DIAGRAM_NOTE)} {for_html(CENSUS_NOTE)}</p>'
    )


def render_html(result: ComparisonResult, *, fail_on: Severity | None) -> str:
    owned, _ = findings_by_query(result)
    groups = sweep_groups(result)
    sweeps = "".join(_sweep(g, i, result) for i, g in enumerate(groups))
    queries = "".join(
        query_block(result.queries[i], owned.get(i, []), i, result) for i in by_importance(result)
    )
    settings = "; ".join(settings_text(result, "→"))
    nav = '<a href="#summary">Summary</a>' + ('<a href="#sweeps">Sweeps</a>' if groups else "")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{csp(JS)}"
        f"<title>planshift: {for_html(result.baseline)} vs {for_html(result.candidate)}</title>"
        f"<style>{CSS}</style><script>{JS}</script></head><body>"
        f"<header><h1>planshift: {for_html(result.baseline)} → {for_html(result.candidate)}</h1>"
        f'<div class="meta">{for_html(title(result))}; run {", ".join(map(str, result.run_ids))}'
        + (f"; settings that differ: {for_html(settings)}" if settings else "")
        + f'</div><nav>{nav}<a href="#queries">Queries</a></nav></header><main>'
        f"{_summary(result, fail_on)}"
        + (f'<section id="sweeps"><h2>Sweeps</h2>{sweeps}</section>' if groups else "")
        + '<section id="queries"><h2>Queries</h2><div class="toolbar">'
        '<button id="expand-all" type="button">expand all</button>'
        '<button id="collapse-all" type="button">collapse all</button></div>'
        f"{queries}</section></main>"
        f"<footer>planshift {for_html(__version__)}: a self-contained report (no network); "
        "charts by matplotlib. Durations are server execution times.</footer>"
        "</body></html>\n"
    )
