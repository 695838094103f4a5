"""What a run's test of a flip's cause says, in words (PS500): the settings that cause it, alone
or together; the row estimate the flip follows; the rejected plan timed on the candidate.

The run records (collectors/attribution.py) the minimal sets of differing settings whose revert
brings the baseline's plan back (`restoring_sets`) and their dual, the minimal sets that alone
move the plan (`causes`, each confirmed by planning). One set {a, b} of causes reads "a and b
together (either one reverted restores the plan)"; causes {a}, {b} read "either of a or b
alone (reverting both is needed to restore the plan)". A setting in a restoring set is part of
the cause; the others "do not move it" only when the search tried every combination.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from detector.model import TimingComparison, Verdict
from detector.model.units import fmt_count
from rules.gucs import SettingChange

Sets = list[list[str]]


def tested_text(
    tested: Mapping[str, Any],
    changes: list[SettingChange],
    version: str | None,
    statistics: bool = False,
    correlations: Sequence[str] = (),
) -> str:
    """What re-planning the candidate with the baseline's settings showed (`correlations`: the
    differences in the correlation of the flipped relation's columns, which move a switch)."""
    if tested.get("error"):
        return f"the re-planning that tests the cause failed on the candidate ({tested['error']})"
    by_name = {c.name: c for c in changes}

    def named(name: str) -> str:
        return by_name[name].text() if name in by_name else name

    restoring: Sets = [list(map(str, s)) for s in tested.get("restoring_sets") or ()]
    if not restoring and tested.get("restores"):  # stores before the sets: the smallest one
        restoring = [[str(name) for name in tested["restores"]]]
    search = tested.get("search") or {}
    complete = bool(search.get("complete", True))
    estimate = estimate_text(tested.get("estimates"), version, correlations)
    tail = counterfactual_text(tested.get("counterfactual"))
    if restoring:
        causes: Sets = [list(map(str, s)) for s in tested.get("causes") or ()]
        involved = {name for names in restoring for name in names}
        others = [str(n) for n in tested.get("tested") or () if n not in involved]
        text = cause_text(restoring, causes, named)
        if others and complete:
            verbs = ("differs", "does") if len(others) == 1 else ("differ", "do")
            text += f" ({', '.join(others)} also {verbs[0]} but {verbs[1]} not move it)"
        elif not complete:
            text += (
                f" (the search stopped at its budget of {search.get('budget')} re-plans: "
                + (f"{', '.join(others)} and " if others else "")
                + "other combinations were not all tried)"
            )
        return text + tail
    if tested.get("tested"):
        reverted = ", ".join(str(n) for n in tested["tested"])
        if estimate:
            cause = estimate
        else:
            cause = (
                f"the planner of {version}" if version else "the server (its statistics or state)"
            )
            if statistics:
                cause += ", or the table statistics, which differ"
        text = f"not the settings: with {reverted} set back the candidate keeps its plan; {cause}"
        return text + tail
    if estimate:
        text = f"no setting differs between the variants: {estimate}"
    elif version and statistics:
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
    return text + tail


def cause_text(restoring: Sets, causes: Sets, named: Callable[[str], str]) -> str:
    """`caused by a and b together (either one reverted restores the plan)` and the like."""
    if causes and len(causes) == 1 and len(causes[0]) == 1:
        return (
            f"caused by {named(causes[0][0])}: setting it back on the candidate brings the "
            "baseline's plan back"
        )
    if causes and len(causes) == 1:
        which = "either one" if len(causes[0]) == 2 else "any one"
        together = _joined([named(n) for n in causes[0]], "and")
        return f"caused by {together} together ({which} reverted restores the plan)"
    if causes and all(len(c) == 1 for c in causes):
        each = _joined([named(c[0]) for c in causes], "or")
        both = "both" if len(causes) == 2 else f"all {len(causes)}"
        return f"caused by either of {each} alone (reverting {both} is needed to restore the plan)"
    if causes:
        parts = [
            f"{_joined([named(n) for n in c], 'and')} together" if len(c) > 1 else named(c[0])
            for c in causes
        ]
        return f"caused by {', or '.join(parts)} (the plan comes back when {_restored(restoring)})"
    if len(restoring) == 1 and len(restoring[0]) == 1:
        return (
            f"caused by {named(restoring[0][0])}: setting it back on the candidate brings the "
            "baseline's plan back"
        )
    names = sorted({n for s in restoring for n in s})
    return (
        f"caused by {_joined([named(n) for n in names], 'and')}: the plan comes back when "
        f"{_restored(restoring)}"
    )


def _restored(restoring: Sets) -> str:
    sets = [_joined(s, "and") for s in restoring]
    return f"{' or '.join(sets)} {'is' if len(restoring[0]) == 1 else 'are'} set back"


def _joined(names: Sequence[str], word: str) -> str:
    if len(names) <= 2:
        return f" {word} ".join(names)
    return f"{', '.join(names[:-1])} {word} {names[-1]}"


def estimate_text(
    estimates: Mapping[str, Any] | None,
    version: str | None = None,
    correlations: Sequence[str] = (),
) -> str:
    """`the flip follows the planner's row estimate (ANALYZE sample): 3900 vs 4100 ...`, or
    where each side switches when its switch point moved, and what moves one that differs."""
    if not estimates or "baseline_switch" not in estimates:
        return ""
    relation = estimates["relation"]
    rows = (
        f"{_rows(estimates['baseline_rows'])} vs {_rows(estimates['candidate_rows'])} estimated "
        f"rows of {relation} for the same parameters"
    )
    if estimates.get("follows_estimate"):
        return (
            f"the flip follows the planner's row estimate (ANALYZE sample): {rows}; both sides "
            f"switch plans between {_rows(estimates['switch_low'])} and "
            f"{_rows(estimates['switch_high'])} estimated rows"
        )
    base, cand = estimates["baseline_switch"], estimates["candidate_switch"]
    if not (base[1] <= cand[0] or cand[1] <= base[0]):
        return ""  # one switch point, but the estimates do not put the sides on either side
    movers = [*([version] if version else []), *correlations]
    text = (
        f"the switch point moved: the baseline switches plans between {_rows(base[0])} and "
        f"{_rows(base[1])} estimated rows of {relation}, the candidate between {_rows(cand[0])} "
        f"and {_rows(cand[1])}"
    )
    if movers:
        text += f" ({', '.join(movers)}"
        text += "; correlations from each server's ANALYZE sample)" if correlations else ")"
    gap = abs(estimates["baseline_rows"] - estimates["candidate_rows"])
    if gap >= 0.01 * max(estimates["baseline_rows"], estimates["candidate_rows"]):
        text += f"; the row estimates differ too: {rows}"
    return text


def _rows(value: float) -> str:
    return fmt_count(round(value))


def counterfactual_text(timed: Mapping[str, Any] | None) -> str:
    """`; the rejected plan, timed on the candidate (random_page_cost = 4): 1.25x faster ...`,
    worded by the verdict of its pairs (detector/engine/comparison/counterfactuals.py)."""
    if not timed:
        return ""
    if timed.get("reason"):
        return f"; the rejected plan could not be timed on the candidate: {timed['reason']}"
    forced = ", ".join(f"{k} = {v}" for k, v in (timed.get("forced_settings") or {}).items())
    budget = timed.get("budget") or {}
    stopped = _stopped(budget)
    if not timed.get("samples"):
        return f"; the rejected plan ({forced}) was not timed on the candidate{stopped}"
    if not timed.get("fingerprint_matched"):
        return f"; forcing the rejected plan on the candidate ({forced}) did not always give it"
    medians = (
        f"median {timed['median_ms']:.3g} vs {timed['chosen_median_ms']:.3g} ms, "
        f"{timed['samples']} pair{'s' if timed['samples'] != 1 else ''}"
    )
    head = f"; the rejected plan, timed on the candidate ({forced})"
    interval = timed.get("interval")
    if not interval or interval.get("ratio") is None:
        return f"{head}: {medians}, no interval (recorded without its pairs){stopped}"
    verdict = Verdict(interval["verdict"])
    told = TimingComparison(
        verdict,
        float(interval["ratio"]),
        interval.get("ci_low"),
        interval.get("ci_high"),
        interval.get("p_value"),
        float(interval.get("min_effect") or 0.0),
        None,
        str(interval.get("reason") or ""),
        paired=True,
    ).describe()
    if verdict is Verdict.REGRESSED:
        said = f"{told} than the chosen one ({medians}): the planner chose the faster plan"
    elif verdict is Verdict.IMPROVED:
        ratio = float(interval["ratio"])
        said = (
            f"{told} than the chosen one ({medians}): the planner's choice costs "
            f"{1 / ratio - 1:.0%}"
        )
    elif verdict is Verdict.UNCHANGED:
        said = f"indistinguishable from the chosen one, {told} ({medians})"
    else:
        said = f"inconclusive against the chosen one, {told} ({medians})"
    return f"{head}: {said}{stopped}"


def _stopped(budget: Mapping[str, Any]) -> str:
    if not budget.get("stopped"):
        return ""
    timed, planned = budget.get("pairs_timed", 0), budget.get("pairs_planned", 0)
    why = "an execution ran past it" if budget["stopped"] == "timeout" else "it was spent"
    return (
        f" (stopped after {timed} of {planned} pairs: {why}; {budget.get('basis', '')}; "
        "--counterfactual-budget sets it)"
    )
