"""PS500 settings-explain-flip: the GUCs and server versions that differ where the plan changed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, Plan, QueryComparison, Severity
from detector.model.settings import CATEGORIES, ENABLES, method_nodes, normalized
from detector.model.units import fmt_count
from rules.base import rule
from rules.causes import tested_text
from rules.common import relative_gap, timing_evidence
from rules.gucs import SettingChange, settings_changes, version_change
from rules.matching import accesses


def _is_off(value: str | None) -> bool:
    return value is not None and normalized(value) in ("off", "false", "0")


def explained_by(change: SettingChange, base_plan: Plan, cand_plan: Plan) -> str | None:
    """`forbids the baseline's Index Scan` when an enable_* switch explains a node's flip."""
    node = ENABLES.get(change.name)
    if node is None:
        return None
    before = change.before if change.before is not None else change.before_default
    after = change.after if change.after is not None else change.after_default
    base_types, cand_types = method_nodes(base_plan), method_nodes(cand_plan)
    if _is_off(after) and not _is_off(before) and node in base_types - cand_types:
        return f"forbids the baseline's {node}"
    if _is_off(before) and not _is_off(after) and node in cand_types - base_types:
        return f"allows the candidate's {node}"
    return None


@rule("PS500", "settings-explain-flip", "settings", Severity.INFO, needs_plan_change=True)
def settings_explain_flip(
    comparison: QueryComparison, options: Mapping[str, Any]
) -> Iterator[Finding]:
    """The plan changed and the two sides ran with different settings or versions.

    ## What it flags
    A query whose dominant plan shape changed (PS100) when the baseline and the
    candidate differ in settings or in server version. Settings are the targets'
    recorded GUCs laid over each plan's EXPLAIN (SETTINGS) list (the lists count
    only when both agree with their side's GUCs: an older store keeps one
    EXPLAIN per plan shape, maybe another target's); a setting absent on one
    side counts as the server default (known defaults compare equal, so
    `random_page_cost = 4` against an unset one is no difference). The
    message lists the differences by category: cost units, plan methods
    (enable_*), memory, parallelism, jit, join search, i/o, other; an enable_*
    switch that forbids a node the baseline used, or allows one the candidate
    uses, says so. When the run tested it (sides of one run: the candidate is
    planned again with subsets of the differing settings set back to the
    baseline's values, every minimal subset that brings the baseline's plan back
    found, within a budget of re-plans), the message starts with the result:
    one setting ("caused by random_page_cost 4 -> 1.1"), settings that act only
    together ("random_page_cost and effective_cache_size together (either one
    reverted restores the plan)"), settings that each flip it alone ("either of
    work_mem or random_page_cost alone (reverting both is needed to restore the
    plan)"), the ones that also differ but do not move it (only when every
    combination was tried; a setting in a cause is never called innocent), or,
    when none does, what the flip follows: the planner's row estimate when both
    sides' choices follow one switch point in estimated rows and their ANALYZE
    samples estimate differently for the same parameters ("the flip follows the
    planner's row estimate (ANALYZE sample): 3900 vs 4100 estimated rows"), else
    the version's planner or the server's state. The rejected plan, timed on
    the candidate, is worded by the interval of its paired ratio: faster,
    slower, or indistinguishable. The table statistics of the relations the
    plans read (rows, the correlation of indexed columns, the share of
    all-visible pages, recorded per side by a run) are listed when they differ,
    and named as what the flip follows when no setting and no version does.
    Info: it explains a flip that the plan-flip rules rate.

    ## Why it matters
    Most plan flips in a config change or an upgrade come from a setting:
    random_page_cost moves the index/sequential crossover (lowering it from 4 to
    1.1 makes random page reads look 3.6x cheaper), work_mem decides hash versus
    sort and lossy bitmaps, enable_* forbid whole node types, and a new version
    brings new defaults (PG 18: effective_io_concurrency 16, io_method worker)
    along with planner changes. Naming the difference turns "the plan changed"
    into "this setting changed the plan".

    ## Example
    The sysbench range, random_page_cost 4 -> 1.1, work_mem 4MB -> 64MB and
    effective_io_concurrency 1 -> 200 (PG 15):

        caused by random_page_cost 4 -> 1.1: setting it back on the candidate
        brings the baseline's plan back (effective_io_concurrency, work_mem also
        differ but do not move it); plan changed; the sides differ: ...

    ## What to do
    Decide whether the named setting change is intended (the others can stay).
    Without a tested cause (other runs, logs), re-run the comparison in one
    run. Calibrate cost settings to the storage and cache the queries really
    see, and treat enable_* = off as a diagnostic, never as configuration.

    ## References
    - Planner method and cost settings (enable_*, random_page_cost):
      https://www.postgresql.org/docs/current/runtime-config-query.html
    - EXPLAIN (SETTINGS): https://www.postgresql.org/docs/current/sql-explain.html
    - pg_settings: https://www.postgresql.org/docs/current/view-pg-settings.html
    """
    if not comparison.plan_changed:
        return
    changes = settings_changes(comparison.baseline, comparison.candidate)
    version = version_change(comparison.baseline, comparison.candidate)
    statistics = statistics_changes(comparison)
    estimates = (comparison.attribution or {}).get("estimates")
    if not changes and version is None and not statistics and not estimates:
        return
    base_plan = comparison.baseline.dominant.plan
    cand_plan = comparison.candidate.dominant.plan
    groups: list[str] = []
    explained: dict[str, str] = {}
    for category in CATEGORIES:
        texts = []
        for change in (c for c in changes if c.category == category):
            text = change.text()
            reason = explained_by(change, base_plan, cand_plan)
            if reason:
                text += f" ({reason})"
                explained[change.name] = reason
            texts.append(text)
        if texts:
            note = " (costs are in different units)" if category == "cost units" else ""
            groups.append(f"{category}: {', '.join(texts)}{note}")
    if version is not None:
        groups.append(version)
    if statistics:
        groups.append("table statistics: " + ", ".join(statistics))
    if estimates and relative_gap(estimates["baseline_rows"], estimates["candidate_rows"]) >= 0.01:
        groups.append(
            f"row estimates: {estimates['relation']} {fmt_count(round(estimates['baseline_rows']))}"
            f" -> {fmt_count(round(estimates['candidate_rows']))} for the same parameters"
        )
    evidence: dict[str, Any] = {
        "settings": [c.as_evidence() for c in changes],
        "explained_by": explained,
        "baseline_version": comparison.baseline.server_version_num,
        "candidate_version": comparison.candidate.server_version_num,
        "baseline_signature": comparison.baseline.dominant.signature,
        "candidate_signature": comparison.candidate.dominant.signature,
        "statistics": statistics,
        **timing_evidence(comparison),
    }
    message = "plan changed; the sides differ: " + "; ".join(groups)
    tested = comparison.attribution
    if tested is not None:
        evidence["attribution"] = dict(tested)
        moved = correlation_changes(comparison, str((estimates or {}).get("relation") or ""))
        text = tested_text(tested, changes, version, bool(statistics), moved)
        message = text + "; " + message
    yield settings_explain_flip.finding(comparison, message, evidence)


def correlation_changes(comparison: QueryComparison, relation: str) -> list[str]:
    """`sbtest1 correlation id 0.6184 -> 0.6268`: every difference in the correlation of the
    relation's indexed columns, however small (0.008 moved a range's switch point by 6%)."""
    if not relation:
        return []
    found = []
    tables = comparison.baseline.tables, comparison.candidate.tables
    before, after = (t.get(relation) or t.get(relation.removeprefix("public.")) for t in tables)
    for column, value in sorted(((before or {}).get("correlation") or {}).items()):
        other = ((after or {}).get("correlation") or {}).get(column)
        if other is not None and abs(float(value) - float(other)) >= 0.0005:
            found.append(f"{relation} correlation {column} {value:.4f} -> {other:.4f}")
    return found


def statistics_changes(comparison: QueryComparison) -> list[str]:
    """What the planner's statistics say differently about the relations either plan reads:
    rows (10% or more apart), the correlation of an indexed column (0.05 or more), the
    all-visible share of the pages (0.3 or more); recorded per side by `planshift run`."""
    base, cand = comparison.baseline, comparison.candidate
    relations = {a.relation for side in (base, cand) for a in accesses(side.dominant.plan)}
    found = []
    for relation in sorted(relations):
        before = base.tables.get(relation) or base.tables.get(relation.removeprefix("public."))
        after = cand.tables.get(relation) or cand.tables.get(relation.removeprefix("public."))
        if not before or not after:
            continue
        rows_b, rows_a = before.get("rows"), after.get("rows")
        if rows_b and rows_a and relative_gap(float(rows_b), float(rows_a)) >= 0.1:
            found.append(f"{relation} rows {fmt_count(rows_b)} -> {fmt_count(rows_a)}")
        for column, value in sorted((before.get("correlation") or {}).items()):
            other = (after.get("correlation") or {}).get(column)
            if other is not None and abs(float(value) - float(other)) >= 0.05:
                found.append(f"{relation} correlation {column} {value:.3f} -> {other:.3f}")
        shares = base.all_visible(relation), cand.all_visible(relation)
        if shares[0] is not None and shares[1] is not None and abs(shares[0] - shares[1]) >= 0.3:
            found.append(f"{relation} all-visible pages {shares[0]:.0%} -> {shares[1]:.0%}")
    return found
