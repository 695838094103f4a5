"""The counterfactual: the plan the candidate rejected, timed on the candidate itself, within a
time budget.

Each sample's parameters run with the settings that bring the rejected plan back and as chosen,
back to back, alternating which goes first (primed as the run's own samples are when the
workload primes). Every pair's two durations are kept: the comparison computes the ratio's
interval from them with the run's paired statistics (detector/engine/stats_paired.py), so a
2% difference reads "indistinguishable", not "the planner chose the faster plan".

A counterfactual can cost more than the measurement (a slow TPC-H query, a forced plan 10x
slower): it gets a budget in seconds (by default a share of the time the query's measurement
took), starts a pair only when the pairs so far say it fits, runs each execution with a
statement_timeout of what is left, and records how it ended (`budget`), so a report can say
"stopped by its budget after 3 of 10 pairs".
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from collectors.attribution import Attribution, Planned
from collectors.session import one_statement
from detector.model import fingerprint, parse_plan

MEASURED = "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) "
MIN_STATEMENT_MS = 100  # a statement_timeout below this is not worth starting an execution


@dataclass(frozen=True)
class Budget:
    """Seconds one counterfactual may spend (None: unbounded), and how they were set."""

    seconds: float | None
    basis: str  # "25% of the measurement (12.0 s)", "60 s", "unbounded"


def counterfactual(
    found: Attribution,
    candidate: Planned,
    sql: str,
    samples: Sequence[Mapping[str, Any] | None],
    baseline_fingerprint: str,
    timeout: str,
    budget: Budget,
    *,
    prime: bool = True,
    expected_pair_s: float = 0.0,
    tell: Callable[[str], None] = lambda text: None,
) -> dict[str, Any]:
    """Time the rejected plan against the chosen one on the candidate, pair by pair, while the
    budget lasts; `expected_pair_s` guesses the first pair's time (the measured medians)."""
    forced_settings = found.rejected_plan_settings
    forced_ms: list[float] = []
    chosen_ms: list[float] = []
    matched = True
    executions = 0
    stopped: str | None = None
    started = time.monotonic()
    pair_s = expected_pair_s
    pair_times: list[float] = []
    tell(
        f"timing the rejected plan on {candidate.name}: up to {len(samples)} pairs, {budget.basis}"
    )
    for index, params in enumerate(samples):
        spent = time.monotonic() - started
        if budget.seconds is not None and spent + pair_s > budget.seconds:
            stopped = "budget"
            break
        pair_started = time.monotonic()
        runs = [(True, forced_settings), (False, {})]
        pair: dict[bool, float] = {}
        try:
            for recorded in (False, True) if prime else (True,):
                for is_forced, overrides in runs if index % 2 == 0 else runs[::-1]:
                    gucs = {
                        "statement_timeout": _timeout(timeout, budget, started),
                        **candidate.gucs,
                        **overrides,
                    }
                    plan_json, _ = one_statement(candidate.connection, MEASURED + sql, params, gucs)
                    executions += 1
                    if not recorded:
                        continue
                    plan = parse_plan(str(plan_json))
                    if is_forced:
                        matched = matched and fingerprint(plan) == baseline_fingerprint
                    pair[is_forced] = float(plan.execution_ms or 0.0)
        except psycopg.errors.QueryCanceled:
            stopped = "timeout"  # an execution ran past what was left of the budget
            break
        forced_ms.append(pair[True])
        chosen_ms.append(pair[False])
        pair_times.append(time.monotonic() - pair_started)
        pair_s = statistics.median(pair_times)
        if time.monotonic() - started > 15.0:
            tell(f"timing the rejected plan on {candidate.name}: {index + 1}/{len(samples)} pairs")
    spent = time.monotonic() - started
    ratios = sorted(f / c for f, c in zip(forced_ms, chosen_ms, strict=True) if c > 0)
    outcome = {
        "seconds": budget.seconds,
        "basis": budget.basis,
        "spent_s": round(spent, 3),
        "pairs_planned": len(samples),
        "pairs_timed": len(forced_ms),
        "executions": executions,
        "stopped": stopped,
    }
    tell(
        f"timed the rejected plan on {candidate.name}: {len(forced_ms)}/{len(samples)} pairs in "
        f"{spent:.1f} s" + (f", stopped by the budget ({budget.basis})" if stopped else "")
    )
    return {
        "forced_settings": forced_settings,
        "fingerprint_matched": matched,
        "samples": len(forced_ms),
        "forced_ms": forced_ms,
        "chosen_ms": chosen_ms,
        "median_ms": statistics.median(forced_ms) if forced_ms else None,
        "chosen_median_ms": statistics.median(chosen_ms) if chosen_ms else None,
        "ratio_vs_chosen": ratios[len(ratios) // 2] if ratios else None,
        "budget": outcome,
    }


def _timeout(timeout: str, budget: Budget, started: float) -> str:
    """The run's statement_timeout, or what is left of the budget when that is less."""
    if budget.seconds is None:
        return timeout
    left_ms = max(int((budget.seconds - (time.monotonic() - started)) * 1000), MIN_STATEMENT_MS)
    limit = _ms(timeout)
    return timeout if limit and limit <= left_ms else f"{left_ms}ms"


def _ms(timeout: str) -> int | None:
    """'60s' / '500ms' / '2min' / '0' as milliseconds (None: unknown, 0: none)."""
    text = timeout.strip().lower()
    units = (("ms", 1), ("min", 60_000), ("s", 1000), ("h", 3_600_000))
    for unit, factor in units:
        if text.endswith(unit):
            try:
                return int(float(text[: -len(unit)]) * factor)
            except ValueError:
                return None
    try:
        return int(float(text))
    except ValueError:
        return None
