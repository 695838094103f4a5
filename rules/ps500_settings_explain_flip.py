"""PS500 settings-explain-flip: the GUCs and server versions that differ where the plan changed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, Plan, QueryComparison, Severity
from detector.model.settings import CATEGORIES, ENABLES, method_nodes, normalized
from rules.base import rule
from rules.common import emit, fmt_count, relative_gap, timing_evidence
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
    planned again with the baseline's value of each differing setting, one at a
    time, then in the smallest combinations), the message starts with the result:
    the settings whose revert brings the baseline's plan back, the ones that also
    differ but do not move it, or, when none does, the version's planner or the
    server's state. The table statistics of the relations the plans read (rows,
    the correlation of indexed columns, the share of all-visible pages, recorded
    per side by a run) are listed when they differ, and named as what the flip
    follows when no setting and no version does. Info: it explains a flip that
    the plan-flip rules rate.

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
    if not changes and version is None and not statistics:
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
        message = _tested_text(tested, changes, version, bool(statistics)) + "; " + message
    yield emit("PS500", comparison, message, evidence)


def _counterfactual_text(timed: Mapping[str, Any] | None) -> str:
    """`; the rejected plan, timed on the candidate (random_page_cost = 4): 1.25x faster ...`."""
    if timed and timed.get("reason"):
        return f"; the rejected plan could not be timed on the candidate: {timed['reason']}"
    if not timed or timed.get("ratio_vs_chosen") is None:
        return ""
    forced = ", ".join(f"{k} = {v}" for k, v in (timed.get("forced_settings") or {}).items())
    if not timed.get("fingerprint_matched"):
        return f"; forcing the rejected plan on the candidate ({forced}) did not always give it"
    ratio = float(timed["ratio_vs_chosen"])
    told = f"{1 / ratio:.2f}x faster" if ratio < 1 else f"{ratio:.2f}x slower"
    cost = (
        f": the planner's choice costs {1 / ratio - 1:.0%}"
        if ratio < 1
        else ": the planner chose the faster plan"
    )
    return (
        f"; the rejected plan, timed on the candidate ({forced}): {told} than the chosen one "
        f"(median {timed['median_ms']:.3g} vs {timed['chosen_median_ms']:.3g} ms, "
        f"{timed['samples']} pairs){cost}"
    )


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


def _tested_text(
    tested: Mapping[str, Any],
    changes: list[SettingChange],
    version: str | None,
    statistics: bool = False,
) -> str:
    """What re-planning the candidate with the baseline's settings showed."""
    if tested.get("error"):
        return f"the re-planning that tests the cause failed on the candidate ({tested['error']})"
    restores = [str(name) for name in tested.get("restores") or ()]
    bystanders = [str(n) for n in tested.get("tested") or () if n not in restores]
    by_name = {c.name: c for c in changes}
    if restores:
        named = ", ".join(by_name[n].text() if n in by_name else n for n in restores)
        text = (
            f"caused by {named}: setting it back on the candidate brings the baseline's plan back"
        )
        if bystanders:
            verb = "differs" if len(bystanders) == 1 else "differ"
            text += f" ({', '.join(bystanders)} also {verb} but do not move it)"
        return text + _counterfactual_text(tested.get("counterfactual"))
    if tested.get("tested"):
        reverted = ", ".join(str(n) for n in tested["tested"])
        cause = f"the planner of {version}" if version else "the server (its statistics or state)"
        if statistics:
            cause += ", or the table statistics, which differ"
        text = f"not the settings: with {reverted} set back the candidate keeps its plan; {cause}"
        return text + _counterfactual_text(tested.get("counterfactual"))
    if version and statistics:
        text = (
            f"no setting differs between the variants: {version}'s planner, or the table "
            "statistics, which differ"
        )
    elif version:
        text = f"no setting differs between the variants: {version}'s planner"
    elif statistics:
        text = "no setting differs between the variants: the flip follows the table statistics"
    else:
        text = "no setting differs between the variants: the table statistics or state differ"
    return text + _counterfactual_text(tested.get("counterfactual"))
