"""The HTML report's per-query block: timings, plan census, latency CDF, findings, plan diff."""

from __future__ import annotations

from detector.model import Finding, PlanNode, PlanVariant, QueryComparison, Side
from detector.model.fingerprint import node_label
from detector.model.units import fmt_ms
from detector.reports.charts import cdf_chart
from detector.reports.common import fmt_count, is_quiet, slug
from detector.reports.escape import for_html
from detector.reports.plan_diff import DiffRow, FlatNode, align, q_error

Q_ERROR_MARK = 10.0  # estimated vs actual rows off by this factor or more are marked


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


def _census(query: QueryComparison) -> str:
    rows = []
    for side, css in ((query.baseline, "side-base"), (query.candidate, "side-cand")):
        for plan in side.plans:
            rows.append(
                f'<tr><td class="{css}">{for_html(side.label)}</td>'
                f'<td class="num">{plan.samples}/{side.samples}</td>'
                f'<td class="num">{fmt_ms(plan.median_ms)}</td>'
                f'<td class="num">{plan.median_cost:,.1f}</td>'
                f'<td class="num">{fmt_count(plan.median_shared_blocks)}</td>'
                f'<td class="sig">{for_html(plan.signature)}</td></tr>'
            )
    return (
        '<table class="census"><thead><tr><th>side</th><th class="num">executions</th>'
        '<th class="num">median ms</th><th class="num">est. cost</th>'
        '<th class="num">shared buffers</th><th>plan shape</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody><caption>plan census: every shape each side used</caption></table>"
    )


def _extras(node: PlanNode) -> str:
    parts = []
    if node.sort_method:
        parts.append(
            f"{node.sort_method}" + (f" ({node.sort_space_type})" if node.sort_space_type else "")
        )
    if node.hash_batches and node.hash_batches > 1:
        parts.append(f"{node.hash_batches} batches")
    if node.lossy_heap_blocks:
        parts.append(f"lossy {node.lossy_heap_blocks:,}")
    if node.heap_fetches:
        parts.append(f"heap fetches {node.heap_fetches:,}")
    if node.rows_removed_by_filter:
        parts.append(f"filtered {fmt_count(node.rows_removed_by_filter)}")
    if node.actual_loops and node.actual_loops > 1:
        parts.append(f"{fmt_count(node.actual_loops)} loops")
    if node.workers_launched:
        parts.append(f"{node.workers_launched} workers")
    return f" <small>{for_html(', '.join(parts))}</small>" if parts else ""


def borrowed(variant: PlanVariant) -> bool:
    """The representative EXPLAIN is of another execution than this query's (the store keeps the
    first EXPLAIN per plan shape, which may come from another query, variant or sweep point): its
    estimated cost or its buffers are far from this query's medians."""
    return _far(variant.plan.total_cost, variant.median_cost, 1.1) or (
        variant.median_shared_blocks is not None
        and abs(variant.plan.buffers_total().shared_total - variant.median_shared_blocks) > 10
        and _far(variant.plan.buffers_total().shared_total, variant.median_shared_blocks, 1.2)
    )


def _far(a: float, b: float, factor: float) -> bool:
    if a <= 0 or b <= 0:
        return a != b
    return max(a, b) / min(a, b) > factor


def _node_cells(flat: FlatNode | None, css: str) -> str:
    if flat is None:
        return f'<td class="node {css} empty"></td>' + f'<td class="num {css}"></td>' * 3
    node = flat.node
    buffers = node.buffers
    title = f"shared hit {buffers.shared_hit:,}, read {buffers.shared_read:,}"
    if buffers.temp_read or buffers.temp_written:
        title += f", temp read {buffers.temp_read:,}, written {buffers.temp_written:,}"
    qerr = q_error(node)
    qcss = " qerr" if qerr is not None and qerr >= Q_ERROR_MARK else ""
    qtitle = f' title="q-error {qerr:,.1f}"' if qerr is not None else ""
    return (
        f'<td class="node {css}" style="padding-left:{0.6 + 1.2 * flat.depth:.1f}em">'
        f"{for_html(node_label(node))}{_extras(node)}</td>"
        f'<td class="num {css}">{fmt_count(node.plan_rows)}</td>'
        f'<td class="num {css}{qcss}"{qtitle}>{fmt_count(node.actual_rows_total)}</td>'
        f'<td class="num {css}" title="{for_html(title)}">{buffers.shared_total:,}</td>'
    )


def plan_diff_table(query: QueryComparison) -> str:
    """Baseline and candidate plan trees side by side, matched nodes on one row."""
    rows: list[DiffRow] = align(query.baseline.dominant.plan, query.candidate.dominant.plan)
    lent = [s for s in (query.baseline, query.candidate) if borrowed(s.dominant)]
    note = ""
    if lent:
        who = " and ".join(for_html(s.label) for s in lent)
        note = (
            f'<p class="note borrowed">{who}: the per-node numbers come from another execution '
            "of the same plan shape (another query or sweep point; the store keeps one EXPLAIN per "
            f"shape), so they are shown greyed; this query's median cost and buffers are in the "
            "census above.</p>"
        )
    body = []
    for row in rows:
        title = f' title="{for_html("; ".join(row.changes))}"' if row.changes else ""
        base_css = "b lent" if query.baseline in lent else "b"
        cand_css = "c lent" if query.candidate in lent else "c"
        body.append(
            f'<tr class="{row.status}"{title}>{_node_cells(row.baseline, base_css)}'
            f'<td class="gap"></td>{_node_cells(row.candidate, cand_css)}</tr>'
        )
    head_side = (
        '<th>{}</th><th class="num">est. rows</th><th class="num">actual rows</th>'
        '<th class="num">buffers</th>'
    )
    changed = sum(r.status != "same" for r in rows)
    return note + (
        f'<table class="plandiff" data-changed="{changed}"><thead><tr>'
        + head_side.format(f'<span class="side-base">{for_html(query.baseline.label)}</span> plan')
        + '<th class="gap"></th>'
        + head_side.format(f'<span class="side-cand">{for_html(query.candidate.label)}</span> plan')
        + f"</tr></thead><tbody>{''.join(body)}</tbody>"
        "<caption>one EXPLAIN ANALYZE of each side's most frequent plan; rows are totals over "
        f"loops, buffers shared hit + read; actual rows off by {Q_ERROR_MARK:.0f}x or more in red. "
        '<span class="legend"><span style="background:var(--bg-changed)">changed</span>'
        '<span style="background:var(--bg-removed)">baseline only</span>'
        '<span style="background:var(--bg-added)">candidate only</span>'
        '<span style="box-shadow:inset 3px 0 0 #6a4fb3">moved</span></span></caption></table>'
    )


def _several_shapes(side: Side) -> str:
    if len(side.plans) < 2:
        return ""
    return (
        f'<p class="note">{for_html(side.label)} used {len(side.plans)} plan shapes; the diff shows '
        f"the most frequent ({side.dominant.samples}/{side.samples}).</p>"
    )


def query_block(query: QueryComparison, findings: list[Finding], chart_id: str) -> str:
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
        + f"</div><div>{cdf_chart(query, chart_id)}</div></div>{_census(query)}"
        f"<h3>Plan diff</h3>{_several_shapes(query.baseline)}{_several_shapes(query.candidate)}"
        f"{plan_diff_table(query)}</details>"
    )
