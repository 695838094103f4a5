"""The host each side was measured on, as report lines (from `conditions.<side>.host`).

One line for the host (load, CPUs, pressure, steal, the probe against the quiet baseline),
one saying whether it was busy and why, one for the sides' reads per block; the host lines
once when both sides were measured in the same run, else one per side.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from detector.model import ComparisonResult


def _pct(value: Any) -> str | None:
    return None if value is None else f"{float(value):.0%}"


def _host_text(host: Mapping[str, Any]) -> str:
    load = host.get("load") or {}
    start, end = load.get("start") or [None], load.get("end") or [None]
    parts = [
        f"load {start[0]} -> {end[0]} (1-minute; mean {load.get('mean_1min')}, "
        f"{load.get('per_cpu')} per CPU)"
    ]
    pressure = host.get("pressure") or {}
    for name, value in (
        ("CPU pressure", _pct(pressure.get("cpu_some"))),
        ("I/O pressure", _pct(pressure.get("io_some"))),
        ("steal", _pct(host.get("steal"))),
    ):
        if value is not None:
            parts.append(f"{name} {value}")
    text = (
        f"host {host.get('host')} ({host.get('cpus')} CPUs), {host.get('seconds')} s of measuring: "
    )
    text += ", ".join(parts)
    probe, base = host.get("probe") or {}, host.get("baseline")
    figures = [
        (name, probe.get(key), (base or {}).get(key), unit)
        for name, key, unit in (
            ("page-cache read", "read_warm_us", "us"),
            ("disk read", "read_cold_us", "us"),
            ("CPU loop", "cpu_loop_ms", "ms"),
        )
        if probe.get(key) is not None
    ]
    if figures:
        shown = ", ".join(f"{name} {now:.3g} {unit}" for name, now, _, unit in figures)
        if base:
            quiet = ", ".join(
                f"{quiet:.3g} {unit}" for _, _, quiet, unit in figures if quiet is not None
            )
            shown += f" (quiet: {quiet}, `planshift calibrate` {str(base['measured_at'])[:10]})"
        else:
            shown += " (no quiet baseline: `planshift calibrate` on the idle host records one)"
        text += f"; probe: {shown}"
    waits = host.get("waits") or {}
    if waits.get("count"):
        text += (
            f"; measuring paused {waits['count']} times for load (--max-load "
            f"{waits.get('max_load')}), {waits.get('seconds')} s in all"
        )
    return text


def _busy_text(host: Mapping[str, Any]) -> str:
    if not host.get("local", True):
        return "host: the server runs on another host, whose load was not measured"
    reasons = host.get("busy_reasons") or []
    if reasons:
        return "host busy: " + "; ".join(reasons) + " (see PS203 for the verdicts at risk)"
    return "host quiet by every measure taken"


def _reads_text(name: str, host: Mapping[str, Any]) -> str:
    reads = host.get("reads") or {}
    blocks = int(reads.get("blocks") or 0)
    if not blocks:
        return f"{name} read no blocks from outside shared buffers"
    if reads.get("us_per_block") is None:
        return f"{name} read {blocks:,} blocks (track_io_timing off: no time per block)"
    return (
        f"{name} {reads['us_per_block']:.3g} us/block over {blocks:,} blocks ({reads.get('cache')})"
    )


def host_lines(result: ComparisonResult) -> list[str]:
    sides = [
        (name, (result.conditions.get(role) or {}).get("host"))
        for role, name in (("baseline", result.baseline), ("candidate", result.candidate))
    ]
    known = [(name, host) for name, host in sides if host]
    if not known:
        return []
    lines: list[str] = []
    shared = len(known) == 2 and _host_text(known[0][1]) == _host_text(known[1][1])
    for name, host in known[:1] if shared else known:
        prefix = "" if shared else f"{name}: "
        lines.append(prefix + _host_text(host))
        lines.append(prefix + _busy_text(host))
    if any((host.get("reads") or {}).get("blocks") for _, host in known):
        reads = "; ".join(_reads_text(name, host) for name, host in known)
        lines.append(f"reads per block (track_io_timing): {reads}")
    else:
        lines.append("reads: no block read from outside shared buffers on either side")
    return lines
