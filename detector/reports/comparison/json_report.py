"""`--format json`: a versioned, deterministic document (sorted keys, stable order)."""

from __future__ import annotations

import json
from typing import Any

from detector.engine.census import comparison_switches
from detector.model import ComparisonResult, PlanVariant, QueryComparison, Side, TimingStats
from detector.model.failures import side_summary
from detector.reports.common import method_lines
from detector.reports.timeline.json_doc import event_document
from detector.version import __version__

FORMAT_VERSION = 1


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _timing(stats: TimingStats | None) -> dict[str, Any] | None:
    if stats is None:
        return None
    return {
        "n": stats.n,
        "median_ms": _round(stats.median_ms),
        "p90_ms": _round(stats.p90_ms),
        "p99_ms": _round(stats.p99_ms),
        "min_ms": _round(stats.min_ms),
        "max_ms": _round(stats.max_ms),
    }


def _plan(variant: PlanVariant) -> dict[str, Any]:
    return {
        "fingerprint": variant.fingerprint,
        "signature": variant.signature,
        "samples": variant.samples,
        "median_ms": _round(variant.median_ms),
        "median_cost": _round(variant.median_cost, 2),
    }


def _side(side: Side) -> dict[str, Any]:
    return {
        "target": side.label,
        "server_version_num": side.server_version_num,
        "settings": dict(sorted(side.settings.items())),
        "plans": [_plan(p) for p in side.plans],
        "timing": _timing(side.timing),
    }


def _query(query: QueryComparison) -> dict[str, Any]:
    timing = query.timing
    return {
        "query_key": query.query_key,
        "name": query.query_name,
        "point": query.point,
        "sql": query.sql,
        "plan_changed": query.plan_changed,
        # captured workloads: executions in production, and the median change times them
        "production_calls": query.candidate.calls or query.baseline.calls,
        "impact_ms": _round(query.impact_ms),
        "baseline": _side(query.baseline),
        "candidate": _side(query.candidate),
        "attribution": None if query.attribution is None else dict(query.attribution),
        "timing": {
            "verdict": timing.verdict.value,
            "ratio": _round(timing.ratio),
            "ci_low": _round(timing.ci_low),
            "ci_high": _round(timing.ci_high),
            "p_value": _round(timing.p_value, 6),
            "min_effect": timing.min_effect,
            "noise_floor": _round(timing.noise_floor),
            "paired": timing.paired,
            "q_value": _round(timing.q_value, 6),
            "decide_at": timing.decide_at,
            "summary": timing.describe(),
        },
    }


def _failures(result: ComparisonResult) -> list[dict[str, Any]]:
    """The queries (and points) with failed executions: compared on the samples that worked,
    or not compared at all (no execution worked on a side), by name and point."""
    rows = []
    for compared, queries in ((True, result.queries), (False, result.failed)):
        for query in queries:
            failures = query.failures
            if failures is None:
                continue
            base, cand = query.baseline, query.candidate
            rows.append(
                {
                    "query_key": query.query_key,
                    "query": query.query_name,
                    "point": query.point,
                    "compared": compared,
                    "baseline": side_summary(base.label, base.samples, failures.baseline),
                    "candidate": side_summary(cand.label, cand.samples, failures.candidate),
                }
            )
    rows.sort(key=lambda row: (row["query"], row["point"] or ""))
    return rows


def to_document(result: ComparisonResult) -> dict[str, Any]:
    document = _document(result)
    if result.events:  # two time windows of a log
        document["log_events"] = [event_document(event) for event in result.events]
    return document


def _document(result: ComparisonResult) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "tool": {"name": "planshift", "version": __version__},
        "baseline": result.baseline,
        "candidate": result.candidate,
        "run_ids": list(result.run_ids),
        "server_version_num": {"baseline": result.versions[0], "candidate": result.versions[1]},
        "settings_diff": {
            name: {"baseline": left, "candidate": right}
            for name, (left, right) in sorted(result.settings_diff.items())
        },
        "summary": {
            "queries": len(result.queries),
            "verdicts": result.verdict_counts(),
            "findings": len(result.findings),
            "worst_severity": (result.worst_severity() or None) and str(result.worst_severity()),
            "not_compared": len(result.failed),
        },
        "failures": _failures(result),
        "findings": [
            {
                "code": f.code,
                "name": f.name,
                "severity": f.severity.value,
                "query_key": f.query_key,
                "query": f.query_name,
                "point": f.point,
                "message": f.message,
                "evidence": f.evidence,
            }
            for f in result.findings
        ],
        "queries": [_query(q) for q in result.queries],
        "suppressed": [
            {"code": f.code, "query": f.query_name, "message": f.message, "reason": reason}
            for f, reason in result.suppressed
        ],
        "noise_run": result.noise_run,
        "conditions": {side: dict(values) for side, values in result.conditions.items()},
        "method": {
            "interleaved": result.interleaved,
            "alpha": result.alpha,
            "not_comparable": result.not_comparable,
            "notes": method_lines(result),
        },
        "tables": dict(result.tables),
        "switch_points": {
            name: [
                {
                    "target": s.target,
                    "before": s.before,
                    "after": s.after,
                    "from": s.from_signature,
                    "to": s.to_signature,
                }
                for s in found
            ]
            for name, found in comparison_switches(result.queries).items()
        },
    }


def render_json(result: ComparisonResult) -> str:
    return json.dumps(to_document(result), indent=2, sort_keys=True, default=str) + "\n"
