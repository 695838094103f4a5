"""Pair two sides of stored runs query by query, compute statistics, apply the rules."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from detector import stats
from detector.approvals import approval_key
from detector.config import Suppression
from detector.errors import PlanshiftError
from detector.model import (
    ComparisonResult,
    Finding,
    Plan,
    PlanVariant,
    QueryComparison,
    Side,
    TimingComparison,
    Verdict,
)
from detector.store import ObservationRow, Store, TargetRecord
from rules import run_rules


@dataclass(frozen=True)
class CompareOptions:
    min_effect: float = 0.10
    alpha: float = 0.05
    min_samples: int = 5
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    rule_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    noise_floors: Mapping[str, float] = field(default_factory=dict)  # per query label
    noise_run: int | str | None = "auto"  # A/A run giving noise floors: id, "auto" or None
    query: str | None = None  # only this query name
    approved: Mapping[str, frozenset[str]] | None = None  # lock file: `query [point]` -> fps
    suppressions: tuple[Suppression, ...] = ()


def resolve_side(store: Store, spec: str, run_id: int | None) -> TargetRecord:
    """A side by name: `NAME` (in run_id or the latest complete run) or `NAME@RUN`.

    NAME matches a target's full name (`pg15/fast`), or its server or variant part when unique.
    """
    name, _, run_text = spec.partition("@")
    if run_text:
        if not run_text.isdigit():
            raise PlanshiftError(
                f"{spec!r}: the run after '@' must be a run id", "see `planshift runs`"
            )
        run_id = int(run_text)
    if run_id is None:
        run_id = store.latest_run_id()
        if run_id is None:
            raise PlanshiftError(
                f"no complete run in {store.path}", "run `planshift run WORKLOAD.toml` first"
            )
    targets = store.targets([run_id])
    if not targets:
        raise PlanshiftError(f"run {run_id} not found in {store.path}", "see `planshift runs`")
    exact = [t for t in targets if t.name == name]
    if exact:
        return exact[0]
    partial = [t for t in targets if name in (t.info.get("server"), t.info.get("variant"))]
    if len(partial) == 1:
        return partial[0]
    names = ", ".join(t.name for t in targets)
    problem = "is ambiguous" if partial else "matches no target"
    raise PlanshiftError(f"{name!r} {problem} in run {run_id}", f"targets of run {run_id}: {names}")


def compare_sides(
    store: Store,
    baseline: TargetRecord,
    candidate: TargetRecord,
    options: CompareOptions | None = None,
) -> ComparisonResult:
    options = options or CompareOptions()
    rows = store.observations([baseline.target_id, candidate.target_id])
    grouped: dict[tuple[str, str | None], dict[int, list[ObservationRow]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for row in rows:
        grouped[(row.query_key, row.point)][row.target_id].append(row)
    queries = store.queries()
    comparisons: list[QueryComparison] = []
    plan_cache: dict[str, tuple[str, Plan]] = {}
    for (key, point), by_target in sorted(grouped.items(), key=lambda kv: _order(kv[0], queries)):
        base_rows = by_target.get(baseline.target_id, [])
        cand_rows = by_target.get(candidate.target_id, [])
        record = queries.get(key)
        name = record.name if record else key
        if options.query and options.query != name:
            continue
        if not base_rows or not cand_rows:
            continue
        label = f"{name} [{point}]" if point else name
        base_side = _side(store, baseline, base_rows, plan_cache)
        cand_side = _side(store, candidate, cand_rows, plan_cache)
        if not base_side.durations_ms and not cand_side.durations_ms:
            timing = plan_only_timing(options.min_effect)
        else:
            timing = stats.compare_timings(
                base_side.durations_ms,
                cand_side.durations_ms,
                min_effect=options.min_effect,
                alpha=options.alpha,
                min_samples=options.min_samples,
                noise_floor=options.noise_floors.get(label),
            )
        comparisons.append(
            QueryComparison(
                query_key=key,
                query_name=name,
                sql=record.sql if record else "",
                baseline=base_side,
                candidate=cand_side,
                timing=timing,
                point=point,
                approved=(
                    None
                    if options.approved is None
                    else options.approved.get(approval_key(name, point), frozenset())
                ),
            )
        )
    findings = []
    for comparison in comparisons:
        findings.extend(
            run_rules(
                comparison,
                select=options.select,
                ignore=options.ignore,
                options=options.rule_options,
            )
        )
    findings.sort(key=lambda f: f.sort_key())
    kept, suppressed = split_suppressed(findings, options.suppressions)
    return ComparisonResult(
        baseline=baseline.name,
        candidate=candidate.name,
        run_ids=tuple(sorted({baseline.run_id, candidate.run_id})),
        queries=tuple(comparisons),
        findings=tuple(kept),
        suppressed=tuple(suppressed),
        settings_diff=settings_diff(baseline, candidate),
        versions=(baseline.server_version_num, candidate.server_version_num),
        tables=table_facts(baseline, candidate),
        noise_run=options.noise_run if isinstance(options.noise_run, int) else None,
    )


def table_facts(baseline: TargetRecord, candidate: TargetRecord) -> dict[str, dict[str, Any]]:
    """Row counts and indexed-column correlation on both sides: did both run on the same data?"""
    left = baseline.info.get("tables") or {}
    right = candidate.info.get("tables") or {}
    return {
        name: {"baseline": left.get(name), "candidate": right.get(name)}
        for name in sorted(set(left) | set(right))
    }


def split_suppressed(
    findings: Sequence[Finding], suppressions: Sequence[Suppression]
) -> tuple[list[Finding], list[tuple[Finding, str]]]:
    """Findings to report, and those a configured suppression covers (with its reason)."""
    kept: list[Finding] = []
    suppressed: list[tuple[Finding, str]] = []
    for finding in findings:
        reason = next(
            (s.reason for s in suppressions if s.matches(finding.query_name, finding.code, finding.name)),
            None,
        )
        if reason is None:
            kept.append(finding)
        else:
            suppressed.append((finding, reason))
    return kept, suppressed


def plan_only_timing(min_effect: float) -> TimingComparison:
    """Plans captured without execution (EXPLAIN (GENERIC_PLAN), logs without timings)."""
    return TimingComparison(
        verdict=Verdict.INCONCLUSIVE,
        ratio=None,
        ci_low=None,
        ci_high=None,
        p_value=None,
        min_effect=min_effect,
        noise_floor=None,
        reason="plan-only: no timings (generic plan)",
    )


def _order(key: tuple[str, str | None], queries: Mapping[str, Any]) -> tuple[str, int, str]:
    """Queries by name; sweep points numerically when they are `param=number`."""
    query_key, point = key
    record = queries.get(query_key)
    name = record.name if record else query_key
    if point is None:
        return (name, 0, "")
    value = point.partition("=")[2]
    try:
        return (name, int(float(value)), point)
    except ValueError:
        return (name, 0, point)


def _side(
    store: Store,
    target: TargetRecord,
    rows: Sequence[ObservationRow],
    plan_cache: dict[str, tuple[str, Plan]],
) -> Side:
    by_fingerprint: dict[str, list[ObservationRow]] = defaultdict(list)
    for row in rows:
        by_fingerprint[row.fingerprint].append(row)
    variants = []
    for fp, fp_rows in by_fingerprint.items():
        durations = [r.duration_ms for r in fp_rows if r.duration_ms is not None]
        if fp not in plan_cache:
            plan_cache[fp] = (store.plan_record(fp).signature, store.plan(fp))
        signature, plan = plan_cache[fp]
        variants.append(
            PlanVariant(
                fingerprint=fp,
                signature=signature,
                plan=plan,
                samples=len(fp_rows),
                median_ms=statistics.median(durations) if durations else None,
                median_cost=statistics.median(r.total_cost for r in fp_rows),
                median_shared_blocks=statistics.median(
                    (r.shared_hit or 0) + (r.shared_read or 0) for r in fp_rows
                ),
            )
        )
    variants.sort(key=lambda v: (-v.samples, v.fingerprint))
    side_durations = tuple(r.duration_ms for r in rows if r.duration_ms is not None)
    return Side(
        label=target.name,
        server_version_num=target.server_version_num,
        settings=dict(target.gucs),
        plans=tuple(variants),
        durations_ms=side_durations,
        timing=stats.timing_stats(side_durations) if side_durations else None,
        planning_ms=tuple(r.planning_ms for r in rows if r.planning_ms is not None),
    )


def settings_diff(
    baseline: TargetRecord, candidate: TargetRecord
) -> dict[str, tuple[str | None, str | None]]:
    """GUCs and recorded server settings that differ between the sides (the likely explanation)."""

    def merged(target: TargetRecord) -> dict[str, str]:
        values = {k: str(v) for k, v in (target.info.get("settings") or {}).items()}
        values.update(target.gucs)
        return values

    left, right = merged(baseline), merged(candidate)
    diff: dict[str, tuple[str | None, str | None]] = {}
    for name in sorted(set(left) | set(right)):
        if left.get(name) != right.get(name):
            diff[name] = (left.get(name), right.get(name))
    if baseline.server_version_num != candidate.server_version_num:
        diff["server_version_num"] = (
            str(baseline.server_version_num),
            str(candidate.server_version_num),
        )
    return diff
