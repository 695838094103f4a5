"""The HTML report's plan diff (templates/plan_diff.html.j2): both sides' plan trees, matched
nodes on one row, each node with its conditions and the counters that explain a flip (Index
Cond, Recheck Cond, Filter, rows removed, exact/lossy heap blocks, workers ...) in visible text,
each side headed by the conditions it ran under and its plan's JSON, and one line above the
table saying what changed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from detector.engine.comparison.plan_mix import mix_text
from detector.model import ComparisonResult, Finding, PlanNode, PlanVariant, QueryComparison, Side
from detector.model.fingerprint import node_label
from detector.model.plan import normalized_cost
from detector.model.plan_details import NodeDetails, node_details
from detector.model.units import fmt_count, fmt_ms, fmt_version
from detector.reports.common import condition_text
from detector.reports.comparison.html_plan_json import PlanControls, PlanDocuments
from detector.reports.comparison.plan_diff import DiffRow, FlatNode, align, node_totals, q_error

Q_ERROR_MARK = 10.0  # estimated vs actual rows off by this factor or more are marked
SETTINGS_SHOWN = 6  # settings that differ named in a side's heading; the rest are counted
NUMBER_COLUMNS = ("est. rows", "rows", "loops", "time ms", "buffers")
CLAUSE_CHARS = 140  # a finding's first clause in the what-changed line is cut here
LEGEND = (
    "One EXPLAIN ANALYZE of each side's most frequent plan. Every number is a total over the "
    "node's loops: PostgreSQL prints rows and time per loop, here they are multiplied by loops "
    "(the estimate too), as buffers already are. time ms includes the node's children and, on "
    "parallel nodes, sums the workers (it can exceed the wall clock); - when measured without "
    "TIMING. buffers = shared hit + read. Under each node, its conditions and counters as "
    "EXPLAIN prints them (rows removed per loop); those that differ from the matched node of the "
    "other side are marked. Hover a node for its cost (per loop, as the planner estimates it) "
    "and buffer detail. copy JSON and download give PostgreSQL's EXPLAIN JSON of the plan, to "
    "paste into pev2 / explain.dalibo.com."
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


@dataclass(frozen=True)
class Detail:
    name: str
    text: str
    changed: bool  # differs from (or is missing on) the matched node of the other side


@dataclass(frozen=True)
class NodeCell:
    label: str
    indent: str  # CSS padding of the tree level
    title: str  # cost and buffer detail, on hover
    notes: str  # never executed
    details: tuple[Detail, ...]
    numbers: tuple[str, ...]
    q_error: float | None

    @property
    def q_error_marked(self) -> bool:
        return self.q_error is not None and self.q_error >= Q_ERROR_MARK


@dataclass(frozen=True)
class RowView:
    status: str
    changes: str
    baseline: NodeCell | None
    candidate: NodeCell | None


@dataclass(frozen=True)
class SideHead:
    role: str
    label: str
    css: str
    controls: PlanControls
    conditions: tuple[str, ...]


@dataclass(frozen=True)
class PlanDiffView:
    element: str
    what_changed: str
    lent: str  # the sides whose per-node numbers are borrowed, for the note; "" when none
    lent_sides: tuple[str, ...]  # b, c: whose numbers are greyed
    heads: tuple[SideHead, SideHead]
    rows: tuple[RowView, ...]
    changed: int
    columns: tuple[str, ...] = NUMBER_COLUMNS


def _title(node: PlanNode) -> str:
    buffers = node.buffers
    parts = [
        f"cost {normalized_cost(node.startup_cost):,.2f}..{normalized_cost(node.total_cost):,.2f}",
        f"shared hit {buffers.shared_hit:,}, read {buffers.shared_read:,}",
    ]
    if buffers.temp_read or buffers.temp_written:
        parts.append(f"temp read {buffers.temp_read:,}, written {buffers.temp_written:,}")
    if buffers.io_read_ms is not None:
        parts.append(f"I/O read {fmt_ms(buffers.io_read_ms)} ms")
    return "; ".join(parts)


def _details(mine: NodeDetails, other: NodeDetails | None, node: PlanNode) -> tuple[Detail, ...]:
    theirs = dict(other.items()) if other is not None else None
    per_loop = (node.actual_loops or 1) > 1
    out = []
    for name, text in mine.items():
        changed = theirs is not None and theirs.get(name) != text
        if per_loop and name.startswith("Rows Removed"):
            text += " per loop"
        out.append(Detail(name, text, changed))
    return tuple(out)


def _cell(
    flat: FlatNode | None,
    details: dict[str, NodeDetails],
    other: NodeDetails | None,
) -> NodeCell | None:
    if flat is None:
        return None
    node = flat.node
    totals = node_totals(node)
    numbers = (
        fmt_count(totals.estimated_rows),
        fmt_count(totals.actual_rows),
        fmt_count(totals.loops),
        fmt_ms(totals.time_ms),
        f"{node.buffers.shared_total:,}",
    )
    mine = details.get(flat.path, NodeDetails())
    return NodeCell(
        label=node_label(node),
        indent=f"{0.6 + 1.2 * flat.depth:.1f}em",
        title=_title(node),
        notes="never executed" if node.actual_loops == 0 else "",
        details=_details(mine, other, node),
        numbers=numbers,
        q_error=q_error(node),
    )


def _head(
    result: ComparisonResult, role: str, side: Side, element: str, documents: PlanDocuments
) -> SideHead:
    variant = side.dominant
    controls = documents.controls(
        variant.plan, f"{element}-{role}-json", f"{element}.{role}.{variant.fingerprint[:8]}.json"
    )
    css = "side-base" if role == "baseline" else "side-cand"
    return SideHead(role, side.label, css, controls, tuple(side_conditions(result, role, side)))


def node_changes(rows: Sequence[DiffRow]) -> list[str]:
    """The nodes that differ, as `a → b`, `a removed`, `b added` (at most three, then a count)."""
    found = []
    for row in rows:
        if row.status == "changed" and row.baseline and row.candidate:
            found.append(f"{node_label(row.baseline.node)} → {node_label(row.candidate.node)}")
        elif row.status in ("removed", "moved") and row.baseline:
            found.append(f"{node_label(row.baseline.node)} {row.status}")
        elif row.status in ("added", "moved") and row.candidate:
            found.append(f"{node_label(row.candidate.node)} {row.status}")
    if len(found) > 3:
        found = [*found[:3], f"{len(found) - 3} more nodes"]
    return found


def what_changed(
    query: QueryComparison,
    findings: Sequence[Finding],
    rows: Sequence[DiffRow],
    events: Sequence[str] = (),
) -> str:
    """One line: the nodes that changed, the measured effect, the first clause of every other
    finding (a setting named as the cause, buffers, spills ...) by severity, and the server
    events the change followed (two windows of a log)."""
    # the same dominant plan: its share of the executions may have moved (engine/plan_mix.py)
    changed = ", ".join(node_changes(rows)) if query.plan_changed else mix_text(query)
    parts = [changed or "same plan"]
    parts.append(query.timing.describe())
    for finding in sorted(findings, key=Finding.sort_key):
        if finding.code in ("PS100", "PS200", "PS201", "PS202"):
            continue  # the plan change and the timing verdict, said above
        clause = finding.message.split("; ")[0]
        if len(clause) > CLAUSE_CHARS:
            clause = clause[: CLAUSE_CHARS - 1] + "…"
        parts.append(f"{finding.code} {clause}")
    return "; ".join(p for p in [*parts, *events] if p)


def plan_diff(
    query: QueryComparison,
    findings: Sequence[Finding],
    result: ComparisonResult,
    element: str,
    documents: PlanDocuments,
    events: Sequence[str] = (),
) -> PlanDiffView:
    """Baseline and candidate plan trees side by side, matched nodes on one row; `element`
    prefixes the ids of the JSON links."""
    base_plan, cand_plan = query.baseline.dominant.plan, query.candidate.dominant.plan
    rows = align(base_plan, cand_plan)
    base_details, cand_details = node_details(base_plan), node_details(cand_plan)
    lent = [s for s in (query.baseline, query.candidate) if borrowed(s.dominant)]
    views = []
    for row in rows:
        base = base_details.get(row.baseline.path) if row.baseline else None
        cand = cand_details.get(row.candidate.path) if row.candidate else None
        views.append(
            RowView(
                row.status,
                "; ".join(row.changes),
                _cell(row.baseline, base_details, cand),
                _cell(row.candidate, cand_details, base),
            )
        )
    heads = (
        _head(result, "baseline", query.baseline, element, documents),
        _head(result, "candidate", query.candidate, element, documents),
    )
    return PlanDiffView(
        element=element,
        what_changed=what_changed(query, findings, rows, events),
        lent=" and ".join(s.label for s in lent),
        lent_sides=tuple(
            css for css, s in (("b", query.baseline), ("c", query.candidate)) if s in lent
        ),
        heads=heads,
        rows=tuple(views),
        changed=sum(r.status != "same" for r in rows),
    )
