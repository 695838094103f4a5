"""The timing rules' shared words (PS200 timing-regression, PS201 timing-improvement, PS202
same-plan-slower): the verdict's message and evidence, and what moves the clock without
moving the cost (the settings, the version, the cache, a busy host)."""

from __future__ import annotations

from typing import Any

from detector.model import QueryComparison
from rules.common import percentiles_text, relative_gap, timing_evidence
from rules.gucs import SettingChange, changes_text, settings_changes, version_change


def timing_message(comparison: QueryComparison) -> str:
    parts = [comparison.timing.describe()]
    spread = percentiles_text(comparison.baseline.timing, comparison.candidate.timing)
    if spread:
        parts.append(spread)
    plan = "plan changed (see PS100)" if comparison.plan_changed else "same plan"
    return ", ".join(parts) + f"; {plan}"


def median_delta_ms(comparison: QueryComparison) -> float | None:
    base, cand = comparison.baseline.timing, comparison.candidate.timing
    if base is None or cand is None:
        return None
    return cand.median_ms - base.median_ms


def verdict_evidence(comparison: QueryComparison) -> dict[str, Any]:
    return {
        **timing_evidence(comparison),
        "median_delta_ms": median_delta_ms(comparison),
        "plan_changed": comparison.plan_changed,
    }


def clock_hint(comparison: QueryComparison) -> tuple[str, list[SettingChange]]:
    """The differing settings that move the clock without the cost, I/O first."""
    changes = settings_changes(comparison.baseline, comparison.candidate)
    io = [c for c in changes if c.category == "i/o"]
    clock = [c for c in changes if c.category in ("jit", "memory", "parallelism")]
    named = io + clock
    version = version_change(comparison.baseline, comparison.candidate)
    parts: list[str] = []
    if named:
        parts.append("settings differ: " + changes_text(named))
    if version:
        parts.append(version)
    base_read = comparison.baseline.dominant.plan.buffers_total().shared_read
    cand_read = comparison.candidate.dominant.plan.buffers_total().shared_read
    if cand_read > base_read:
        parts.append(
            f"shared read {base_read} -> {cand_read} blocks in the example executions "
            "(a colder cache?)"
        )
    base_io = comparison.baseline.dominant.plan.buffers_total().io_read_ms
    cand_io = comparison.candidate.dominant.plan.buffers_total().io_read_ms
    if base_io and cand_io and relative_gap(base_io, cand_io) >= 0.2:
        parts.append(f"I/O read time {base_io:.3g} -> {cand_io:.3g} ms in the example executions")
    busy = [
        side for side in (comparison.baseline, comparison.candidate) if side.host and side.host.busy
    ]
    if len(busy) == 1:  # one side measured on a busy host, the other not (two runs)
        reasons = "; ".join(r.text for r in busy[0].host.busy_reasons()) if busy[0].host else ""
        parts.append(f"{busy[0].label}'s host was busy ({reasons}) and the other side's not")
    if not parts:
        parts.append(
            "no recorded setting differs: compare the cache state, the storage and the host"
        )
    return "; ".join(parts), named
