"""`--format html`: one self-contained page (inline CSS, JS and SVG charts; works offline),
rendered from templates/report.html.j2.

Sections: a sweep's crossing charts first when the comparison has sweeps (cost and duration per
plan against the parameter with their crossings, the points at a glance, the plan-shape census
as a plan diagram); the summary (the gate, one row per query that regressed, improved, is
inconclusive or changed plan, most important first; targets, settings that differ, findings by
rule and by workload impact); the server events of a comparison of two log windows, as a
timeline beside the flips; and one block per query (latency CDF of both sides, plan census,
findings, and the plan diff with each node's conditions).
"""

from __future__ import annotations

from dataclasses import dataclass

from detector.engine.census import Switch
from detector.engine.comparison.plan_mix import mix_text
from detector.engine.sweeps import SweepGroup, analyze, cost_settings_differ, sweep_groups
from detector.model import ComparisonResult, Finding, QueryComparison, Severity
from detector.reports.census.html import (
    DIAGRAM_NOTE,
    Diagram,
    diagram,
    grid_from_sweep,
    shape_letters,
)
from detector.reports.common import (
    by_importance,
    condition_lines,
    condition_text,
    failing_findings,
    findings_by_query,
    findings_of_failed,
    fmt_number,
    is_quiet,
    method_lines,
    not_compared_reason,
    production_lines,
    ranked_findings,
    rule_counts,
    settings_text,
    title,
    verdict_summary,
    worst_severities,
)
from detector.reports.comparison.charts import Chart, sweep_chart
from detector.reports.comparison.events import EventRow, between, timeline
from detector.reports.comparison.host_lines import host_lines
from detector.reports.comparison.html_plan import LEGEND, Q_ERROR_MARK
from detector.reports.comparison.html_plan_json import PlanDocuments
from detector.reports.comparison.html_query import QueryView, anchor, query_view
from detector.reports.comparison.notes import data_lines, failed_errors
from detector.reports.comparison.sweeps import caption
from detector.reports.html_env import pack, render_fragment, render_page

TOP_FINDINGS = 25
OPEN_BLOCKS = 6  # query blocks expanded when the page opens, most important first
CENSUS_NOTE = (
    "This is the census of the comparison's two sides; across many targets (versions x "
    "settings x sweep points) see `planshift census`."
)


@dataclass(frozen=True)
class Gate:
    css: str  # gate-fail, gate-pass, or "" when off
    verdict: str  # fails, passes, off
    failing: int
    fail_on: str


@dataclass(frozen=True)
class GlanceRow:
    query: QueryComparison
    anchor: str
    worst: str | None
    mix: str | None  # the plan mix moved under the same dominant plan


@dataclass(frozen=True)
class TargetRow:
    role: str
    name: str
    css: str
    version: int | None
    settings: str
    measured: str


@dataclass(frozen=True)
class RankedRow:
    impact: float
    finding: Finding
    query: QueryComparison | None
    anchor: str


@dataclass(frozen=True)
class PointRow:
    query: QueryComparison
    text: str
    anchor: str
    letters: tuple[str, str]
    worst: str | None


@dataclass(frozen=True)
class FailedView:
    """A query not compared: no execution of it worked on a side (PS700)."""

    query: QueryComparison
    reason: str
    errors: tuple[tuple[str, str], ...]  # (side, `N executions failed: ERROR ...`)
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class SweepView:
    index: int
    name: str
    param: str
    chart: Chart
    caption: str
    switches: tuple[Switch, ...]
    cost_crossings: str
    duration_crossings: str
    points: tuple[PointRow, ...]
    diagram: Diagram
    note: str


def _gate(result: ComparisonResult, fail_on: Severity | None) -> Gate:
    if fail_on is None:
        return Gate("", "off", 0, "never")
    failing = len(failing_findings(result, fail_on))
    return Gate("gate-fail" if failing else "gate-pass", "fails" if failing else "passes",
                failing, fail_on.value)  # fmt: skip


def _targets(result: ComparisonResult) -> list[TargetRow]:
    first = result.queries[0] if result.queries else None
    rows = []
    for role, name, version in zip(
        ("baseline", "candidate"), (result.baseline, result.candidate), result.versions, strict=True
    ):
        side = (first.baseline if role == "baseline" else first.candidate) if first else None
        settings = ", ".join(f"{k}={v}" for k, v in sorted(side.settings.items())) if side else ""
        css = "side-base" if role == "baseline" else "side-cand"
        measured = condition_text(result.conditions.get(role) or {})
        rows.append(TargetRow(role, name, css, version, settings, measured))
    return rows


def _sweep(
    group: SweepGroup, index: int, result: ComparisonResult, worst: dict[int, Severity]
) -> SweepView:
    analysis = analyze(group)
    grid = grid_from_sweep(group)
    letters = shape_letters(grid)
    position = {id(q): i for i, q in enumerate(result.queries)}
    points = []
    for point in group.points:
        query = point.query
        found = worst.get(position[id(query)])
        points.append(
            PointRow(
                query, point.text, anchor(query),
                (letters[query.baseline.dominant.signature],
                 letters[query.candidate.dominant.signature]),
                found.value if found else None,
            )
        )  # fmt: skip
    units = cost_settings_differ(list(result.settings_diff))
    cross = [
        ", ".join(f"{group.param}≈{fmt_number(x)}" for x in found)
        for found in (analysis.cost_crossings, analysis.duration_crossings)
    ]
    return SweepView(
        index, group.name, group.param, sweep_chart(group, analysis, f"sweep{index}"),
        caption(analysis, group.param, units), analysis.switches, cross[0], cross[1],
        tuple(points), diagram(grid, f"census{index}"), f"{DIAGRAM_NOTE} {CENSUS_NOTE}",
    )  # fmt: skip


def _failed(result: ComparisonResult) -> list[FailedView]:
    owned, _ = findings_of_failed(result)
    return [
        FailedView(query, not_compared_reason(query), tuple(failed_errors(query)),
                   tuple(owned.get(index, [])))
        for index, query in enumerate(result.failed)
    ]  # fmt: skip


def _queries(
    result: ComparisonResult, documents: PlanDocuments, events: list[EventRow]
) -> list[QueryView]:
    owned, _ = findings_by_query(result)
    after = [f"after: {e.text} ({e.at})" for e in events]
    views = []
    for rank, i in enumerate(by_importance(result)):
        query, findings = result.queries[i], owned.get(i, [])
        # a sweep's points start closed: its chart and points table lead to them
        shown = not (is_quiet(query) and not findings) and rank < OPEN_BLOCKS and not query.point
        views.append(
            query_view(query, findings, i, result, documents, open_=shown,
                       events=after if query.plan_changed or mix_text(query) else ())
        )  # fmt: skip
    return views


def render_html(result: ComparisonResult, *, fail_on: Severity | None) -> str:
    worst = worst_severities(result)
    documents = PlanDocuments()
    sweeps = [_sweep(g, i, result, worst) for i, g in enumerate(sweep_groups(result))]
    ranked = [
        RankedRow(impact, finding, query, anchor(query) if query else "")
        for impact, finding, query in ranked_findings(result)
    ]
    glance = [  # a sweep's points are in its section
        GlanceRow(result.queries[i], anchor(result.queries[i]),
                  worst[i].value if i in worst else None, mix_text(result.queries[i]))
        for i in by_importance(result)
        if not is_quiet(result.queries[i]) and not result.queries[i].point
    ]  # fmt: skip
    points = sum(1 for q in result.queries if q.point)
    queries = _queries(result, documents, between(result))
    # the bodies of the blocks that start closed are packed: a sweep's points are alike, and
    # their 32 blocks took 320 kB of the range8000 page (the script unpacks them at load)
    bodies = [
        "" if view.open else render_fragment("query_body.html.j2", v=view) for view in queries
    ]
    return render_page(
        "report.html.j2",
        r=result,
        title=title(result),
        settings="; ".join(settings_text(result, "→")),
        gate=_gate(result, fail_on),
        summary=f"{verdict_summary(result)}; {len(result.findings)} findings.",
        glance=glance,
        quiet=sum(1 for q in result.queries if is_quiet(q) and not q.point),
        points=points,
        targets=_targets(result),
        # the data, the builds, the hosts' conditions and a captured workload's production settings (the
        # measured modes are in the targets table), as the terminal report says them
        method=[
            *data_lines(result),
            *(line for line in condition_lines(result) if line.startswith("build:")),
            *host_lines(result),
            *production_lines(result),
            *method_lines(result),
        ],
        failed=_failed(result),
        rules=rule_counts(result),
        ranked=ranked[:TOP_FINDINGS],
        more=max(0, len(ranked) - TOP_FINDINGS),
        sweeps=sweeps,
        timeline=timeline(result),
        queries=queries,
        documents=pack(documents.texts()),
        bodies=pack(bodies) if any(bodies) else "",
        plan_legend=LEGEND,
        q_error_mark=f"{Q_ERROR_MARK:.0f}",
    )
