"""Pair two sides of stored runs query by query, compute statistics, apply the rules."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

from detector.engine.comparison.alignment import (
    aligned as aligned,  # re-exported: bench/ imports it here
)
from detector.engine.comparison.approvals import approval_key
from detector.engine.comparison.conditions import (
    busy_host_verdicts,
    comparison_conditions,
    host_conditions,
    not_comparable,
    not_compared,
)
from detector.engine.comparison.config import Suppression
from detector.engine.comparison.counterfactuals import judged
from detector.engine.comparison.failures import with_failures
from detector.engine.comparison.options import CompareOptions
from detector.engine.comparison.query_pairs import SidePair, pair_sides
from detector.engine.comparison.verdicts import (
    below_min_delta as below_min_delta,  # bench/ imports it here
)
from detector.engine.comparison.verdicts import plan_only_timing, query_verdicts
from detector.engine.comparison.windows import (
    WindowSide,
    is_window,
    window_events,
    window_pairs,
    window_side,
)
from detector.errors import PlanshiftError
from detector.model import (
    ComparisonResult,
    Finding,
    QueryComparison,
    Severity,
    TimingComparison,
)
from detector.model.bulk import builder
from detector.model.host import HostConditions
from detector.store import Store, TargetRecord
from rules import RuleRunner

new_comparison = builder(QueryComparison)


_DEFAULTS = CompareOptions()
# the README's "How it decides" quotes this text (tests/test_docs.py checks it word for word)
HOW_IT_DECIDES = f"""\
- **Timing verdict** per query, from every sample of each side:
  - *Interleaved sides* (one `planshift run`: sample *i* ran back to back on every side, with
    the same parameters) are compared pair by pair, on the logs of the per-sample ratios
    candidate/baseline: the effect is their biweight location, a weighted mean in which a pair
    counts less the farther it lies from the bulk and not at all beyond 6 median absolute
    deviations (the one descheduled execution in ten of a loaded machine), and one t statistic
    (the location over its biweight standard error, with (n - 1) / 2 degrees of freedom) gives
    both its 95% confidence interval and the test, so the two always agree.
  - *Other sides* (two runs, `NAME@RUN`, time windows of a log) are two independent samples: the
    effect is the ratio of medians, with a bootstrap 95% confidence interval and a Mann-Whitney U
    test. Reports say the sides were not interleaved: drift between them can pass for a change.
  - `regressed` / `improved` needs the interval and the test significant at
    {_DEFAULTS.alpha:.0%}, an effect of at least `--min-effect` ({_DEFAULTS.min_effect:.0%}), a
    median that moved by at least `--min-delta-ms` ({_DEFAULTS.min_delta_ms} ms), an effect above
    the query's A/A noise floor when one is known, and a Benjamini-Hochberg q-value below
    {_DEFAULTS.alpha:.0%} across the queries of the comparison (false discovery control; the
    report says how many false alarms to expect among its verdicts).
  - `unchanged` when the whole interval lies inside the ±{_DEFAULTS.min_effect:.0%} margin of the
    minimum effect; a noise floor never widens it, it can only make a verdict `inconclusive`.
  - Everything else is `inconclusive`, shown with its effect, interval, reason and about how many
    samples would decide it. Fewer than {_DEFAULTS.min_samples} samples is always `inconclusive`,
    and so is an interleaved comparison with fewer than {_DEFAULTS.min_samples} pairs within 9
    median absolute deviations of its effect.
"""


def resolve_side(store: Store, spec: str, run_id: int | None) -> TargetRecord:
    """A side by name: `NAME` (in run_id or the latest complete run) or `NAME@RUN`.

    NAME matches a target's full name (`pg15/fast`), or its server or variant part when unique.
    """
    if is_window(spec):
        return window_side(store, spec)
    name, _, run_text = spec.partition("@")
    if run_text:
        if not run_text.isdigit():
            raise PlanshiftError(
                f"{spec!r}: the run after '@' must be a run id", "see `planshift runs`"
            )
        run_id = int(run_text)
    run_id = store.run_or_latest(run_id)
    targets = store.targets([run_id])
    if not targets:
        raise PlanshiftError(f"run {run_id} not found in {store.path}", "see `planshift runs`")
    exact = [t for t in targets if t.name == name]
    if exact:
        return exact[0]
    full = [t for t in targets if name == f"{t.info.get('server')}/{t.info.get('variant')}"]
    if full:
        return full[0]
    partial = [t for t in targets if name in (t.info.get("server"), t.info.get("variant"))]
    if len(partial) == 1:
        return partial[0]
    names = ", ".join(t.name for t in targets)
    problem = "is ambiguous" if partial else "matches no target"
    raise PlanshiftError(
        f"{name!r} {problem} in run {run_id}",
        f"targets of run {run_id}: {names}; NAME@RUN or --run picks another run (`planshift runs`)",
    )


def compare_sides(
    store: Store,
    baseline: TargetRecord,
    candidate: TargetRecord,
    options: CompareOptions | None = None,
) -> ComparisonResult:
    options = options or CompareOptions()
    with paused_gc():
        return _compare(store, baseline, candidate, options)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Building ~10 objects per query for 100,000 queries triggers the cyclic collector over
    and over (none of them form cycles): pausing it halves the time of a large comparison.

    Resuming would have the next collections walk every object made meanwhile (a few tenths
    of a second); freeze + unfreeze moves them to the oldest generation unwalked instead,
    unless the program keeps frozen objects of its own."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _compare(
    store: Store, baseline: TargetRecord, candidate: TargetRecord, options: CompareOptions
) -> ComparisonResult:
    hosts: dict[int, HostConditions] = {}
    if isinstance(baseline, WindowSide) or isinstance(candidate, WindowSide):
        pairs = window_pairs(store, baseline, candidate, options.query)
    else:
        for target in (baseline, candidate):
            host = host_conditions(store, target)
            if host is not None:
                hosts[target.target_id] = host
        pairs = pair_sides(store, baseline, candidate, query=options.query, hosts=hosts)
    interleaved = is_interleaved(baseline, candidate)
    verdicts = query_verdicts(pairs, interleaved, options)
    mismatch = not_comparable(baseline, candidate)
    if mismatch is not None:
        verdicts = [not_compared(verdict, mismatch[0]) for verdict in verdicts]
    comparisons = busy_host_verdicts(
        compared(pairs, verdicts, options, attributions_for(baseline, candidate, options)),
        options.busy_host,
    )
    del pairs  # a million pairs freed for the findings to reuse
    comparisons, failed = with_failures(store, baseline, candidate, comparisons, options)
    findings = apply_rules(comparisons, options, failed)
    if options.busy_host == "fail":
        findings = [
            replace(f, severity=Severity.ERROR) if f.code == "PS203" else f for f in findings
        ]
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
        conditions=comparison_conditions(baseline, candidate, hosts),
        noise_run=options.noise_run if isinstance(options.noise_run, int) else None,
        interleaved=interleaved,
        alpha=options.alpha,
        events=window_events(store, baseline, candidate),
        failed=tuple(failed),
        not_comparable=None if mismatch is None else mismatch[1],
    )


def compared(
    pairs: Sequence[SidePair],
    timings: Sequence[TimingComparison | None],
    options: CompareOptions,
    attributions: Mapping[str, Any] | None = None,
) -> list[QueryComparison]:
    plan_only = plan_only_timing(options.min_effect)
    approved = options.approved
    tested = attributions or {}
    if len(timings) != len(pairs):
        raise ValueError(f"{len(timings)} timing verdicts for {len(pairs)} queries")
    columns = {name: list(map(itemgetter(i), pairs)) for i, name in enumerate(SidePair._fields)}
    keys, points = columns["query_key"], columns["point"]
    return list(
        map(
            new_comparison,
            keys,
            columns["query_name"],
            columns["sql"],
            columns["baseline"],
            columns["candidate"],
            [plan_only if timing is None else timing for timing in timings],
            points,
            repeat(None)
            if approved is None
            else [approved.get(approval_key(pair.query_name, pair.point), {}) for pair in pairs],
            [tested.get(attribution_key(k, p)) for k, p in zip(keys, points, strict=True)]
            if tested
            else repeat(None),
            repeat(None),  # failures: detector.engine.comparison.failures attaches them
        )
    )


def attribution_key(query_key: str, point: str | None) -> str:
    """Where the runner files a query's attribution in the candidate target's info."""
    return f"{query_key}|{point or ''}"


def attributions_for(
    baseline: TargetRecord, candidate: TargetRecord, options: CompareOptions = _DEFAULTS
) -> dict[str, Any]:
    """The candidate's attributions against this baseline, per attribution_key, with the
    verdict of each counterfactual (detector/engine/comparison/counterfactuals.py)."""
    if baseline.run_id != candidate.run_id:
        return {}
    filed = candidate.info.get("attribution") or {}
    return {
        key: judged(
            found[baseline.name],
            min_effect=options.min_effect,
            alpha=options.alpha,
            min_samples=options.min_samples,
        )
        for key, found in filed.items()
        if baseline.name in found
    }


def apply_rules(
    comparisons: Sequence[QueryComparison],
    options: CompareOptions,
    failed: Sequence[QueryComparison] = (),
) -> list[Finding]:
    """Every finding of the selected rules, sorted; `failed` are the queries not compared
    because they failed on a side (only the rules about failures see them)."""
    check = RuleRunner(select=options.select, ignore=options.ignore, options=options.rule_options)
    findings = [
        replace(finding, point=comparison.point) if comparison.point else finding
        for comparison, found in chain(
            zip(comparisons, check.many(comparisons), strict=True),
            zip(failed, map(check, failed), strict=True),
        )
        for finding in found
    ]
    findings.sort(key=Finding.sort_key)
    return findings


def is_interleaved(baseline: TargetRecord, candidate: TargetRecord) -> bool:
    """Both sides measured by the runner in one run: sample i ran back to back on both."""
    measured = {"embedded", "dsn"}
    return (
        baseline.run_id == candidate.run_id
        and baseline.source in measured
        and candidate.source in measured
        and not isinstance(baseline, WindowSide)
        and not isinstance(candidate, WindowSide)
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
    if not suppressions:
        return list(findings), []
    kept: list[Finding] = []
    suppressed: list[tuple[Finding, str]] = []
    for finding in findings:
        reason = next(
            (
                s.reason
                for s in suppressions
                if s.matches(finding.query_name, finding.code, finding.name)
            ),
            None,
        )
        if reason is None:
            kept.append(finding)
        else:
            suppressed.append((finding, reason))
    return kept, suppressed


def settings_diff(
    baseline: TargetRecord, candidate: TargetRecord
) -> dict[str, tuple[str | None, str | None]]:
    """GUCs and recorded server settings that differ between the sides (the likely explanation)."""

    def merged(target: TargetRecord) -> dict[str, str]:
        values = {k: str(v) for k, v in (target.info.get("settings") or {}).items()}
        values.update(target.gucs)
        return values

    left, right = merged(baseline), merged(candidate)
    variant_gucs = set(baseline.gucs) | set(candidate.gucs)

    def value(values: dict[str, str], name: str) -> str | None:
        # a GUC the other side's variant sets is at its default here; other absent names are
        # settings this server does not have (io_method before 18): None, shown as n/a
        return values.get(name, "default" if name in variant_gucs else None)

    diff: dict[str, tuple[str | None, str | None]] = {}
    for name in sorted(set(left) | set(right)):
        if left.get(name) != right.get(name):
            diff[name] = (value(left, name), value(right, name))
    versions = (baseline.server_version_num, candidate.server_version_num)
    if None not in versions and versions[0] != versions[1]:  # unknown is no difference
        diff["server_version_num"] = (
            str(baseline.server_version_num),
            str(candidate.server_version_num),
        )
    return diff
