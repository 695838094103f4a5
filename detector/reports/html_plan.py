"""The HTML report's plan diff: both sides' plan trees, matched nodes on one row, each side headed
by the conditions it ran under and its plan's JSON, every node with its actuals over its loops."""

from __future__ import annotations

from detector.model import ComparisonResult, PlanNode, PlanVariant, QueryComparison, Side
from detector.model.fingerprint import node_label
from detector.model.plan import normalized_cost
from detector.model.units import fmt_ms, fmt_version
from detector.reports.common import condition_text, fmt_count
from detector.reports.escape import for_html
from detector.reports.html_plan_json import json_controls
from detector.reports.plan_diff import DiffRow, FlatNode, align, node_totals, q_error

Q_ERROR_MARK = 10.0  # estimated vs actual rows off by this factor or more are marked
SETTINGS_SHOWN = 6  # settings that differ named in a side's heading; the rest are counted
NUMBER_COLUMNS = ("est. rows", "rows", "loops", "time ms", "buffers")
LEGEND = (
    "One EXPLAIN ANALYZE of each side's most frequent plan. Every number is a total over the "
    "node's loops: PostgreSQL prints rows and time per loop, here they are multiplied by loops "
    "(the estimate too), as buffers already are. time ms includes the node's children and, on "
    "parallel nodes, sums the workers (it can exceed the wall clock); - when measured without "
    "TIMING. buffers = shared hit + read. Hover a node for its cost and buffer detail."
)


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


def side_conditions(result: ComparisonResult, role: str, side: Side) -> list[str]:
    """What a side ran under: server version, the settings that differ, how it was measured,
    and the facts of its representative EXPLAIN."""
    known = side.server_version_num is not None
    lines = [f"PostgreSQL {fmt_version(side.server_version_num)}"] if known else []
    index = 0 if role == "baseline" else 1
    differing = sorted(result.settings_diff.items())
    lines += [f"{name}={values[index] or 'default'}" for name, values in differing[:SETTINGS_SHOWN]]
    if len(differing) > SETTINGS_SHOWN:
        lines.append(f"{len(differing) - SETTINGS_SHOWN} more settings differ (see the summary)")
    measured = condition_text(result.conditions.get(role) or {})
    if measured:
        lines.append(measured)
    plan = side.dominant.plan
    if plan.execution_ms is not None:
        lines.append(f"this EXPLAIN ANALYZE: {fmt_ms(plan.execution_ms)} ms")
    if plan.jit_used:
        lines.append("JIT used")
    if plan.generic:
        lines.append("generic plan")
    return lines


def _extras(node: PlanNode) -> str:
    parts = []
    if node.actual_loops == 0:
        parts.append("never executed")
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
        parts.append(f"filtered {fmt_count(node.rows_removed_by_filter)} per loop")
    if node.workers_launched:
        parts.append(f"{node.workers_launched} workers")
    return f" <small>{for_html(', '.join(parts))}</small>" if parts else ""


def _node_title(node: PlanNode) -> str:
    buffers = node.buffers
    parts = [
        f"cost {normalized_cost(node.startup_cost):,.2f}..{normalized_cost(node.total_cost):,.2f} "
        f"(per loop, as the planner estimates it)",
        f"shared hit {buffers.shared_hit:,}, read {buffers.shared_read:,}",
    ]
    if buffers.temp_read or buffers.temp_written:
        parts.append(f"temp read {buffers.temp_read:,}, written {buffers.temp_written:,}")
    if buffers.io_read_ms is not None:
        parts.append(f"I/O read {fmt_ms(buffers.io_read_ms)} ms")
    return "; ".join(parts)


def _node_cells(flat: FlatNode | None, css: str) -> str:
    if flat is None:
        cells = f'<td class="num {css} empty"></td>' * len(NUMBER_COLUMNS)
        return f'<td class="node {css} empty"></td>{cells}'
    node = flat.node
    totals = node_totals(node)
    qerr = q_error(node)
    qcss = " qerr" if qerr is not None and qerr >= Q_ERROR_MARK else ""
    qtitle = f' title="q-error {qerr:,.1f}"' if qerr is not None else ""
    return (
        f'<td class="node {css}" style="padding-left:{0.6 + 1.2 * flat.depth:.1f}em" '
        f'title="{for_html(_node_title(node))}">{for_html(node_label(node))}{_extras(node)}</td>'
        f'<td class="num {css}">{fmt_count(totals.estimated_rows)}</td>'
        f'<td class="num {css}{qcss}"{qtitle}>{fmt_count(totals.actual_rows)}</td>'
        f'<td class="num {css}">{fmt_count(totals.loops)}</td>'
        f'<td class="num {css}">{fmt_ms(totals.time_ms)}</td>'
        f'<td class="num {css}">{node.buffers.shared_total:,}</td>'
    )


def _heading(result: ComparisonResult, role: str, side: Side, element: str) -> str:
    css = "side-base" if role == "baseline" else "side-cand"
    variant = side.dominant
    controls = json_controls(
        variant.plan, f"{element}-{role}-json", f"{element}.{role}.{variant.fingerprint[:8]}.json"
    )
    conditions = " · ".join(for_html(line) for line in side_conditions(result, role, side))
    return (
        f'<th colspan="{1 + len(NUMBER_COLUMNS)}" class="side-head" data-role="{role}">'
        f'<span class="{css}">{for_html(side.label)}</span> plan {controls}'
        f'<div class="conditions">{conditions}</div></th>'
    )


def plan_diff_table(query: QueryComparison, result: ComparisonResult, element: str) -> str:
    """Baseline and candidate plan trees side by side, matched nodes on one row; `element`
    prefixes the ids of the JSON links."""
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
    numbers = "".join(f'<th class="num">{name}</th>' for name in NUMBER_COLUMNS)
    changed = sum(r.status != "same" for r in rows)
    return note + (
        f'<table class="plandiff" data-changed="{changed}"><thead><tr>'
        f'{_heading(result, "baseline", query.baseline, element)}<th class="gap"></th>'
        f"{_heading(result, 'candidate', query.candidate, element)}</tr>"
        f'<tr><th>node</th>{numbers}<th class="gap"></th><th>node</th>{numbers}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody><caption>{for_html(LEGEND)} Actual rows off by "
        f"{Q_ERROR_MARK:.0f}x or more from the estimate in red. "
        '<span class="legend"><span style="background:var(--bg-changed)">changed</span>'
        '<span style="background:var(--bg-removed)">baseline only</span>'
        '<span style="background:var(--bg-added)">candidate only</span>'
        '<span style="box-shadow:inset 3px 0 0 #6a4fb3">moved</span></span></caption></table>'
    )
