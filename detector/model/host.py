"""The host a side was measured on, and whether it was busy: pure data, no I/O.

A run samples its host (`collectors/host.py`): load average, CPUs, CPU time stolen by a
hypervisor, pressure stall information (PSI: the share of time tasks waited for a CPU or for
I/O), and a probe at its start and end (8 KiB reads from the page cache and from the disk, a
fixed CPU loop, each ~50 ms so that it is preempted as often as a query is). `planshift
calibrate` records the same probe on a quiet host: the probe now against the probe quiet is the
read latency against the host's quiet baseline, measured the same way. Each side also carries
its own read latency per block (track_io_timing over its measured executions), shown beside it
but not judged against the probe: PostgreSQL's per-block time depends on the access pattern and
version (on this 2-core VM at load ~3, within one minute: 2-5 us for sequential reads, 7-10 us
for an index scan's, 9-19 us for a bitmap heap scan's, 18-26 us through PG 18's I/O workers,
against 1.8 us for the probe), so a ratio of the two would call a quiet host busy.

Why these thresholds (`BUSY`): each one marks the point where the executions being measured
start to wait for the host rather than for their own work.
- load per CPU >= 1.0: on average every CPU already had a runnable task, so the backend being
  measured waits for a CPU mid-execution (planshift's own client and backend add about 1);
- CPU pressure >= 25% of the measuring time: some runnable task waited for a CPU a quarter of
  the time (PSI `some`; an idle host shows a few percent, four CPU burners on 2 CPUs 98%);
- steal >= 5%: the hypervisor gave this machine's CPUs to other guests;
- I/O pressure >= 10% (warm cache only: a cold trial's own reads wait on the disk by design);
- the probe's reads or CPU loop >= 2x their quiet time: at 2x a plan's reads cost what a quiet
  host's reads of twice as many blocks would, the margin by which the issue's I/O-bound plan
  flips reversed (a bitmap heap scan's reads at 12 us against 5 us quiet). Four CPU burners on
  this VM made them 5-10x (page-cache reads 9-19 us against 1.3-3.5, the CPU loop 4-8x).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

HOST_PHASES = ("start", "during", "end", "wait")
# threshold of each busy criterion (see the module docstring for why)
BUSY: Mapping[str, float] = {
    "load_per_cpu": 1.0,
    "cpu_pressure": 0.25,
    "steal": 0.05,
    "io_pressure": 0.10,
    "probe_slowdown": 2.0,
}
HOST_SAMPLE_COLUMNS = (
    "taken_at",
    "phase",
    "load1",
    "load5",
    "load15",
    "cpus",
    "cpu_ticks",
    "steal_ticks",
    "cpu_some_us",
    "io_some_us",
    "io_full_us",
    "read_warm_us",
    "read_cold_us",
    "cpu_loop_ms",
    "waited_s",
    "max_load",
)


@dataclass(frozen=True)
class HostSample:
    """One reading of the host (a row of host_samples)."""

    taken_at: datetime
    phase: str  # HOST_PHASES
    load1: float
    load5: float
    load15: float
    cpus: int
    cpu_ticks: int | None = None  # /proc/stat, all CPUs, all states
    steal_ticks: int | None = None
    cpu_some_us: int | None = None  # PSI totals
    io_some_us: int | None = None
    io_full_us: int | None = None
    read_warm_us: float | None = None  # the probe (start and end rows)
    read_cold_us: float | None = None
    cpu_loop_ms: float | None = None
    waited_s: float | None = None  # wait rows
    max_load: float | None = None

    def row(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in HOST_SAMPLE_COLUMNS)


@dataclass(frozen=True)
class HostBaseline:
    """A quiet host's probe (`planshift calibrate`)."""

    host: str
    measured_at: datetime
    read_warm_us: float
    read_cold_us: float | None
    cpu_loop_ms: float
    load1: float
    cpus: int
    cpu_pressure: float | None = None
    forced: bool = False  # recorded although the host was not quiet


@dataclass(frozen=True)
class BusyReason:
    kind: str  # "cpu" or "io": what it makes slow
    text: str


@dataclass(frozen=True)
class HostConditions:
    """How busy the host was while a side was measured, and the side's read latency."""

    host: str
    local: bool  # the server ran on this host (embedded, or a local socket)
    cpus: int
    load_start: tuple[float, float, float]
    load_end: tuple[float, float, float]
    load_mean: float  # 1-minute load, mean of the readings taken while measuring
    load_max: float
    seconds: float  # from the start reading to the end reading
    steal: float | None = None  # shares of the measuring time
    cpu_pressure: float | None = None
    io_pressure: float | None = None
    read_warm_us: float | None = None  # the run's probe: the worse of start and end
    read_cold_us: float | None = None
    cpu_loop_ms: float | None = None
    baseline: HostBaseline | None = None
    read_blocks: int = 0  # the side's measured executions: shared blocks read ...
    read_ms: float | None = None  # ... and their I/O time (None: track_io_timing off)
    cold: bool = False  # the side's cache mode
    waits: int = 0  # run --max-load: pauses, their seconds, the threshold
    waited_s: float = 0.0
    max_load: float | None = None

    @property
    def load_per_cpu(self) -> float:
        return self.load_mean / max(self.cpus, 1)

    @property
    def read_us(self) -> float | None:
        """The side's mean read time per block (track_io_timing), microseconds."""
        if self.read_ms is None or self.read_blocks <= 0:
            return None
        return self.read_ms * 1000.0 / self.read_blocks

    @property
    def read_slowdown(self) -> float | None:
        """The probe's reads now against quiet, for this side's cache mode (the read latency
        against the host's quiet baseline)."""
        return self.probe_slowdowns().get("cold reads" if self.cold else "warm reads")

    def probe_slowdowns(self) -> dict[str, float]:
        """The run's probe against the quiet one: warm and cold reads, the CPU loop."""
        base = self.baseline
        if base is None:
            return {}
        pairs = {
            "warm reads": (self.read_warm_us, base.read_warm_us),
            "cold reads": (self.read_cold_us, base.read_cold_us),
            "CPU loop": (self.cpu_loop_ms, base.cpu_loop_ms),
        }
        return {
            name: now / quiet
            for name, (now, quiet) in pairs.items()
            if now is not None and quiet is not None and quiet > 0
        }

    def busy_reasons(self) -> tuple[BusyReason, ...]:
        """Why the host was busy, each measured figure against its threshold (empty: quiet).
        A server on another host: its host was not measured, so nothing is said of it."""
        return self._reasons

    @cached_property
    def _reasons(self) -> tuple[BusyReason, ...]:
        if not self.local:
            return ()
        found: list[BusyReason] = []
        if self.load_per_cpu >= BUSY["load_per_cpu"]:
            found.append(
                BusyReason(
                    "cpu",
                    f"load {self.load_per_cpu:.1f} per CPU ({self.load_mean:.1f} on "
                    f"{self.cpus} CPUs) >= {BUSY['load_per_cpu']:.1f}",
                )
            )
        for kind, share, key, what in (
            ("cpu", self.cpu_pressure, "cpu_pressure", "tasks waited for a CPU"),
            ("cpu", self.steal, "steal", "the hypervisor took the CPUs (steal)"),
            ("io", None if self.cold else self.io_pressure, "io_pressure", "tasks waited on I/O"),
        ):
            if share is not None and share >= BUSY[key]:
                found.append(BusyReason(kind, f"{what} {share:.0%} of the time >= {BUSY[key]:.0%}"))
        for name, ratio in self.probe_slowdowns().items():
            if ratio >= BUSY["probe_slowdown"]:
                kind = "cpu" if name == "CPU loop" else "io"
                found.append(
                    BusyReason(
                        kind,
                        f"the probe's {name} took {ratio:.1f}x as long as on the quiet host >= "
                        f"{BUSY['probe_slowdown']:.0f}x",
                    )
                )
        return tuple(found)

    @property
    def busy(self) -> bool:
        return bool(self.busy_reasons())

    def as_dict(self) -> dict[str, Any]:
        """The JSON report's `conditions.<side>.host`."""
        base = self.baseline
        return {
            "host": self.host,
            "local": self.local,
            "cpus": self.cpus,
            "load": {
                "start": list(self.load_start),
                "end": list(self.load_end),
                "mean_1min": round(self.load_mean, 2),
                "max_1min": round(self.load_max, 2),
                "per_cpu": round(self.load_per_cpu, 2),
            },
            "seconds": round(self.seconds, 1),
            "steal": _share(self.steal),
            "pressure": {
                "cpu_some": _share(self.cpu_pressure),
                "io_some": _share(self.io_pressure),
            },
            "probe": {
                "read_warm_us": _round(self.read_warm_us),
                "read_cold_us": _round(self.read_cold_us),
                "cpu_loop_ms": _round(self.cpu_loop_ms),
            },
            "reads": {
                "blocks": self.read_blocks,
                "io_ms": _round(self.read_ms),
                "us_per_block": _round(self.read_us),
                "cache": "cold" if self.cold else "warm",
            },
            "baseline": None
            if base is None
            else {
                "measured_at": base.measured_at.isoformat(),
                "read_warm_us": _round(base.read_warm_us),
                "read_cold_us": _round(base.read_cold_us),
                "cpu_loop_ms": _round(base.cpu_loop_ms),
                "load_1min": base.load1,
                "forced": base.forced,
            },
            "read_latency_ratio": _round(self.read_slowdown),
            "waits": {
                "count": self.waits,
                "seconds": round(self.waited_s, 1),
                "max_load": self.max_load,
            },
            "busy": self.busy,
            "busy_reasons": [reason.text for reason in self.busy_reasons()],
        }


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _share(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _delta_share(first: int | None, last: int | None, whole: float) -> float | None:
    if first is None or last is None or whole <= 0:
        return None
    return max(0.0, min(1.0, (last - first) / whole))


def summarize(
    samples: Sequence[HostSample],
    *,
    host: str,
    local: bool,
    baseline: HostBaseline | None,
    read_blocks: int,
    read_ms: float | None,
    cold: bool,
) -> HostConditions | None:
    """A side's conditions from its run's readings (None: the run took none)."""
    readings = sorted((s for s in samples if s.phase != "wait"), key=lambda s: s.taken_at)
    if not readings:
        return None
    first, last = readings[0], readings[-1]
    seconds = (last.taken_at - first.taken_at).total_seconds()
    loads = [s.load1 for s in readings]
    ticks = (
        None
        if first.cpu_ticks is None or last.cpu_ticks is None
        else last.cpu_ticks - first.cpu_ticks
    )
    probes = [s for s in readings if s.read_warm_us is not None or s.cpu_loop_ms is not None]
    waits = [s for s in samples if s.phase == "wait"]

    def worst(values: Sequence[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return max(known) if known else None

    return HostConditions(
        host=host,
        local=local,
        cpus=max(s.cpus for s in readings),
        load_start=(first.load1, first.load5, first.load15),
        load_end=(last.load1, last.load5, last.load15),
        load_mean=sum(loads) / len(loads),
        load_max=max(loads),
        seconds=seconds,
        steal=_delta_share(first.steal_ticks, last.steal_ticks, float(ticks or 0)),
        cpu_pressure=_delta_share(first.cpu_some_us, last.cpu_some_us, seconds * 1e6),
        io_pressure=_delta_share(first.io_some_us, last.io_some_us, seconds * 1e6),
        read_warm_us=worst([p.read_warm_us for p in probes]),
        read_cold_us=worst([p.read_cold_us for p in probes]),
        cpu_loop_ms=worst([p.cpu_loop_ms for p in probes]),
        baseline=baseline,
        read_blocks=read_blocks,
        read_ms=read_ms,
        cold=cold,
        waits=len(waits),
        waited_s=sum(w.waited_s or 0.0 for w in waits),
        max_load=next((w.max_load for w in waits if w.max_load is not None), None),
    )
