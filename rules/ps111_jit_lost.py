"""PS111 jit-lost: the candidate does not JIT-compile where the baseline did, or cannot at all."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from detector.model import Finding, QueryComparison, Severity, Side
from detector.model.settings import default_of, normalized
from detector.model.units import fmt_duration
from rules.base import rule
from rules.common import flip_context, fmt_cost, plan_cost
from rules.gucs import changes_text, settings_changes, side_settings

#: why a side did not JIT: its settings, its plan's cost, or a server that cannot
REASONS = ("jit off", "jit disabled", "below jit_above_cost", "server cannot jit", "unknown")
CANNOT = "server cannot jit"


def _setting(side: Side, name: str) -> str | None:
    """The side's effective value (as side_settings has it), cheaply when the plan's list does
    not name the setting: this runs for every query whose candidate did not JIT."""
    value = side.settings.get(name)
    if value is None and name in side.dominant.plan.settings:
        value = side_settings(side).get(name)
    return str(value) if value is not None else default_of(name, side.server_version_num)


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def refused(side: Side, who: str) -> tuple[str, str] | None:
    """(reason, text) when the side's settings alone keep its plan from JIT, else None."""
    if normalized(_setting(side, "jit") or "on") in ("off", "false", "0"):
        return "jit off", f"jit is off on the {who}"
    threshold = _number(_setting(side, "jit_above_cost"))
    if threshold is not None and threshold < 0:
        return "jit disabled", f"jit_above_cost -1 disables JIT on the {who}"
    return None


def why_not(side: Side, who: str) -> tuple[str, str]:
    """(reason, text): why the side's dominant plan (not JIT-compiled) was not."""
    settings = refused(side, who)
    if settings is not None:
        return settings
    threshold = _number(_setting(side, "jit_above_cost"))
    cost = plan_cost(side.dominant)
    if threshold is not None and cost < threshold:
        return "below jit_above_cost", (
            f"the {who}'s plan costs {fmt_cost(cost)}, below jit_above_cost "
            f"{threshold:g}: the planner does not ask for JIT"
        )
    above = f" {threshold:g}" if threshold is not None else ""
    return CANNOT, (
        f"the {who} server cannot JIT: jit is on and the plan's cost {fmt_cost(cost)} is "
        f"above jit_above_cost{above}, yet it ran without JIT (a build without LLVM, or the "
        "jit_provider library missing: pg_jit_available() is false)"
    )


@rule(
    "PS111",
    "jit-lost",
    "plan-flip",
    Severity.WARNING,
    # silent when the candidate JIT-compiled, or neither side did and the candidate's
    # settings turned JIT off (then its reason is not CANNOT); settings are part of the kind
    gate=lambda c, _: (
        not c.candidate.dominant.plan.jit_used
        and (c.baseline.dominant.plan.jit_used or refused(c.candidate, "candidate") is None)
    ),
)
def jit_lost(comparison: QueryComparison, options: Mapping[str, Any]) -> Iterator[Finding]:
    """The candidate does not JIT-compile where the baseline did, or cannot JIT.

    ## What it flags
    The baseline's dominant plan reports JIT compilation (EXPLAIN's JIT section
    with at least one function) and the candidate's does not. The message gives
    the baseline's JIT time and says why the candidate did not compile: jit is
    off, jit_above_cost is -1, the candidate's plan costs less than
    jit_above_cost, or the candidate server cannot JIT at all (jit on and the
    cost above the threshold, yet no JIT in an executed plan: a build without
    LLVM). The plan shape can stay the same. JIT newly used is PS108.

    Also, with no JIT on either side: the candidate asks for JIT (jit on, the
    plan's cost above jit_above_cost) and its server cannot JIT, where the
    baseline did not ask (jit off, or its cost below the threshold): "JIT
    unavailable". When neither server can JIT, nothing changed and the rule is
    silent.

    Severity follows the measured verdict like PS100: regressed -> error,
    improved -> info, otherwise warning.

    ## Why it matters
    JIT compiles expressions and tuple deforming into machine code: a long
    analytic query that evaluates expressions over millions of rows runs
    faster with it, and loses that when the candidate stops compiling. A
    server built without LLVM (many packaged or embedded builds) accepts
    jit = on and never compiles, so two servers of one version with the same
    settings can differ; an upgrade onto such a build looks like a slower
    executor. Losing JIT on a short query is usually a gain: compile time was
    overhead.

    ## Example
    An aggregate over 200000 rows with jit on and every JIT threshold 0:
    PG 15 (Debian, JIT available) -> PG 17 (a build without JIT):

        JIT lost: the baseline compiled for 43.6 ms in a 102 ms execution;
        the candidate server cannot JIT: jit is on and the plan's cost
        11024.6 is above jit_above_cost 0, yet it ran without JIT (a build
        without LLVM, or the jit_provider library missing:
        pg_jit_available() is false); 1.45x faster (95% CI 1.43-1.48)

    ## What to do
    If the query is long and CPU-bound, check `SELECT pg_jit_available()` on
    the candidate and install the server's LLVM JIT package (Debian/Ubuntu:
    postgresql-NN ships llvmjit; RPM: postgresqlNN-llvmjit), or restore the
    jit settings. If the query got faster, keep JIT off for it: raise
    jit_above_cost above its cost.

    ## References
    - Just-in-time compilation: https://www.postgresql.org/docs/current/jit.html
    - When to JIT: https://www.postgresql.org/docs/current/jit-decision.html
    - pg_jit_available():
      https://www.postgresql.org/docs/current/functions-info.html
    """
    base_plan = comparison.baseline.dominant.plan
    cand_plan = comparison.candidate.dominant.plan
    if cand_plan.jit_used:
        return
    reason, text = why_not(comparison.candidate, "candidate")
    if reason == CANNOT and not cand_plan.analyzed:
        # a plan that was not executed (a generic plan, a log without analyze) may just not say
        reason, text = "unknown", "the candidate's plan, not executed, shows no JIT"
    jit_ms = base_plan.jit_total_ms
    if base_plan.jit_used:
        head = "JIT lost: the baseline compiled"
        if jit_ms is not None:
            head += f" for {fmt_duration(jit_ms)}"
            if base_plan.execution_ms:
                head += f" in a {fmt_duration(base_plan.execution_ms)} execution"
        parts = [head, text]
    else:
        base_reason, base_text = why_not(comparison.baseline, "baseline")
        if reason != CANNOT or base_reason == CANNOT:
            return
        parts = [f"JIT unavailable: {text}", base_text]
    context = flip_context(comparison, None)
    jit_settings = [
        c
        for c in settings_changes(comparison.baseline, comparison.candidate)
        if c.category == "jit"
    ]
    if jit_settings:
        parts.append(f"jit settings: {changes_text(jit_settings)}")
    evidence: dict[str, Any] = {
        "change": "lost" if base_plan.jit_used else "unavailable",
        "reason": reason,
        "baseline_jit_total_ms": jit_ms,
        "baseline_execution_ms": base_plan.execution_ms,
        "candidate_jit_settings": {
            k: v for k, v in side_settings(comparison.candidate).items() if k.startswith("jit")
        },
        "settings": [c.as_evidence() for c in jit_settings],
        **context.evidence,
    }
    message = "; ".join([*parts, *context.tail])
    yield jit_lost.finding(comparison, message, evidence, context.severity)
