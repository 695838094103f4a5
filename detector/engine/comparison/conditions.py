"""The conditions each side was measured under, and what they allow a comparison to say.

- Host conditions: the run's readings of its host (`host_samples`), the host's quiet baseline
  (`planshift calibrate`) and the side's reads, summarised per side (`detector.model.host`).
- Comparable sides: durations measured in different timing modes (EXPLAIN ANALYZE with and
  without per-node timing, or the bare statement) or with a cold and a warm cache measure
  different things; their ratio is a measurement artefact, so every timing verdict is
  `inconclusive`, with the reason, and never a regression a CI gate fails on.
- A busy host: `--busy-host` says what becomes of the verdicts it puts at risk
  (`detector.model.host_risk`): `warn` (PS203 warns), `inconclusive` (they become
  inconclusive as well), `fail` (PS203 is an error).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from detector.engine.comparison.production import production_facts
from detector.model import QueryComparison, TimingComparison, Verdict
from detector.model.build import build_comparison, side_build
from detector.model.comparison import NOT_COMPARED
from detector.model.host import HostConditions, summarize
from detector.model.host_risk import busy_hosts, host_text, verdict_risks
from detector.model.workload import TIMING_MODES
from detector.store import Store, TargetRecord

MEASURED_SOURCES = ("embedded", "dsn")


def host_conditions(store: Store, target: TargetRecord) -> HostConditions | None:
    """A measured side's host conditions; None for logs and runs that took no readings."""
    if target.source not in MEASURED_SOURCES:
        return None
    samples = store.host_samples(target.run_id)
    if not samples:
        return None
    host = next((r.host for r in store.runs() if r.run_id == target.run_id), "")
    blocks, io_ms = store.side_reads(target.target_id)
    return summarize(
        samples,
        host=host,
        local=bool(target.info.get("host_local", True)),
        baseline=store.host_baseline(host),
        read_blocks=blocks,
        read_ms=io_ms,
        cold=cache_mode(target) == "cold",
    )


def cache_mode(target: TargetRecord) -> str | None:
    cache = target.info.get("cache")
    return str(cache.get("mode")) if isinstance(cache, dict) and cache.get("mode") else None


WHY_MODES_DIFFER = {
    "on": "per-node timing costs time in proportion to the rows a plan moves",
    "plain": "the bare statement's time is the client's round trip, rows sent included",
}


def not_comparable(baseline: TargetRecord, candidate: TargetRecord) -> tuple[str, str] | None:
    """(short reason for each verdict, the report's line) when the two sides' durations do not
    compare; None when they do (or it is unknown)."""
    short, why = [], []
    modes = (baseline.info.get("timing"), candidate.info.get("timing"))
    if None not in modes and modes[0] != modes[1]:
        shown = [TIMING_MODES.get(str(mode), str(mode)) for mode in modes]
        short.append(f"timing modes {shown[0]} vs {shown[1]}")
        why += [WHY_MODES_DIFFER[m] for m in sorted(set(map(str, modes))) if m in WHY_MODES_DIFFER]
    caches = (cache_mode(baseline), cache_mode(candidate))
    if None not in caches and caches[0] != caches[1]:
        short.append(f"cache {caches[0]} vs {caches[1]}")
        why.append("a cold execution reads what a warm one finds in memory")
    if not short:
        return None
    reason = f"{NOT_COMPARED}: measured in different modes ({'; '.join(short)})"
    line = (
        f"timings not compared: {baseline.name} and {candidate.name} were measured in different "
        f"modes ({'; '.join(short)}): {'; '.join(why)}, so their durations do not compare and "
        "every timing verdict is inconclusive; measure both sides in one mode (one `planshift "
        "run` does)"
    )
    return reason, line


def not_compared(timing: TimingComparison | None, reason: str) -> TimingComparison | None:
    """The verdict of sides whose durations do not compare: inconclusive, ratio kept."""
    if timing is None:
        return None
    return replace(timing, verdict=Verdict.INCONCLUSIVE, reason=reason, decide_at=None)


def busy_host_verdicts(comparisons: Sequence[QueryComparison], mode: str) -> list[QueryComparison]:
    """`--busy-host inconclusive`: the verdicts a busy host put at risk become inconclusive."""
    if mode != "inconclusive":
        return list(comparisons)
    out = []
    for query in comparisons:
        risks = verdict_risks(query) if query.timing.verdict is not Verdict.INCONCLUSIVE else ()
        if risks:
            reason = (
                f"{host_text(busy_hosts(query))}, which can reverse this verdict "
                f"({', '.join(risk.kind for risk in risks)}; see PS203)"
            )
            query = replace(
                query,
                timing=replace(
                    query.timing, verdict=Verdict.INCONCLUSIVE, reason=reason, decide_at=None
                ),
            )
        out.append(query)
    return out


def side_conditions(target: TargetRecord, host: HostConditions | None) -> dict[str, Any]:
    """What a report shows of how a side was measured (absent keys were not recorded)."""
    info, settings = target.info, target.info.get("settings") or {}
    found = {
        "version": info.get("version"),
        "initdb_options": info.get("initdb_options"),
        "data_checksums": settings.get("data_checksums"),
        "io_method": settings.get("io_method"),
        "timing": info.get("timing"),
        "cache": info.get("cache"),
        "build": side_build(info),
        "host": None if host is None else host.as_dict(),
        "production": production_facts(target),  # a captured workload: against production
    }
    return {key: value for key, value in found.items() if value is not None}


def comparison_conditions(
    baseline: TargetRecord, candidate: TargetRecord, hosts: dict[int, HostConditions]
) -> dict[str, Any]:
    """Each side's conditions, and `build`: same build, or which build facts differ."""
    found: dict[str, Any] = {
        "baseline": side_conditions(baseline, hosts.get(baseline.target_id)),
        "candidate": side_conditions(candidate, hosts.get(candidate.target_id)),
    }
    left, right = found["baseline"].get("build"), found["candidate"].get("build")
    if left is not None and right is not None:
        found["build"] = build_comparison(left, right)
    return found
