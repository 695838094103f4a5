"""The HTML report's per-query block (templates/query.html.j2): timings, findings, latency CDF,
plan census, plan diff."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from detector.engine.comparison.plan_mix import mix_text
from detector.model import ComparisonResult, Finding, PlanVariant, QueryComparison, Side
from detector.reports.common import is_quiet, slug
from detector.reports.comparison.charts import Chart, cdf_chart
from detector.reports.comparison.html_plan import PlanDiffView, plan_diff
from detector.reports.comparison.html_plan_json import PlanControls, PlanDocuments


def anchor(query: QueryComparison) -> str:
    return "q-" + slug(query.label)


@dataclass(frozen=True)
class CensusRow:
    side: Side
    css: str
    plan: PlanVariant
    controls: PlanControls | None  # None: the dominant plan, whose JSON is in the plan diff


@dataclass(frozen=True)
class QueryView:
    query: QueryComparison
    anchor: str
    index: int
    open: bool
    findings: tuple[Finding, ...]
    severities: tuple[tuple[str, int], ...]  # (severity, findings of it), worst first
    mix: str | None  # `plan mix changed: ...` under the same dominant plan (engine/plan_mix.py)
    sides: tuple[tuple[Side, str], tuple[Side, str]]  # (side, css)
    cdf: Chart
    census: tuple[CensusRow, ...]
    diff: PlanDiffView


def _census(query: QueryComparison, element: str, documents: PlanDocuments) -> list[CensusRow]:
    rows = []
    sides = (("baseline", query.baseline, "side-base"), ("candidate", query.candidate, "side-cand"))
    for role, side, css in sides:
        for plan in side.plans:
            controls = None
            if plan is not side.dominant:
                fingerprint = plan.fingerprint[:8]
                controls = documents.controls(
                    plan.plan,
                    f"{element}-{role}-{fingerprint}-json",
                    f"{element}.{role}.{fingerprint}.json",
                )
            rows.append(CensusRow(side, css, plan, controls))
    return rows


def query_view(
    query: QueryComparison,
    findings: list[Finding],
    index: int,
    result: ComparisonResult,
    documents: PlanDocuments,
    *,
    open_: bool | None = None,
    events: Sequence[str] = (),
) -> QueryView:
    """The query's block; `index` (its place in result.queries) makes its element ids unique;
    `open_` overrides whether it starts expanded (by default: unless quiet without findings);
    `events` are the log's server events the plan change followed (two windows of a log)."""
    element = f"plan{index}"
    severities = sorted({f.severity for f in findings}, key=lambda s: -s.rank)
    return QueryView(
        query=query,
        anchor=anchor(query),
        index=index,
        open=not (is_quiet(query) and not findings) if open_ is None else open_,
        findings=tuple(findings),
        severities=tuple((s.value, sum(f.severity == s for f in findings)) for s in severities),
        mix=mix_text(query),
        sides=((query.baseline, "side-base"), (query.candidate, "side-cand")),
        cdf=cdf_chart(query, f"cdf{index}"),
        census=tuple(_census(query, element, documents)),
        diff=plan_diff(query, findings, result, element, documents, events),
    )
