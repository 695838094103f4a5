"""Reading the host planshift measures on: load, CPUs, steal, pressure, and a short probe.

`read_host` is one reading from /proc (load average, /proc/stat's CPU ticks and steal, the
PSI totals of /proc/pressure); what the kernel does not offer is None. `Probe` times 8 KiB
preads of a file of its own from the page cache and, after dropping it from the cache with
posix_fadvise(POSIX_FADV_DONTNEED) and readahead off (POSIX_FADV_RANDOM), from the disk, and a
fixed CPU loop: the same figures on a quiet host (`planshift calibrate`) are the baseline a run's
figures and its sides' track_io_timing read latency are held against. `HostMonitor` takes the
readings of a run (a probe at its start and end, a reading every few seconds in between) and
pauses measuring while the 1-minute load is above `run --max-load`, for at most `--max-wait`
seconds in all, recording each pause.
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from psycopg.conninfo import conninfo_to_dict

from detector.model.host import HostSample

BLOCK = 8192
PROBE_BLOCKS = 1024  # an 8 MiB file
WARM_READS = 30_000  # ~50 ms: long enough to be preempted as often as a query would be
COLD_READS = 64
CPU_LOOP = 500_000  # ~30 ms of Python on this VM quiet, for the same reason
LOCAL_HOSTS = frozenset({"", "localhost", "127.0.0.1", "::1"})


def _proc_fields(path: str) -> list[str] | None:
    try:
        with open(path) as handle:
            return handle.read().split("\n")
    except OSError:
        return None


def _psi_total(lines: list[str] | None, kind: str) -> int | None:
    for line in lines or ():
        if line.startswith(kind + " "):
            for part in line.split():
                if part.startswith("total="):
                    return int(part[6:])
    return None


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def read_host(phase: str, now: datetime | None = None) -> HostSample:
    """One reading of the host (no probe)."""
    load1, load5, load15 = os.getloadavg()
    cpu_ticks = steal = None
    stat = _proc_fields("/proc/stat")
    if stat and stat[0].startswith("cpu "):
        ticks = [int(value) for value in stat[0].split()[1:]]
        # user nice system idle iowait irq softirq steal (guest time is inside user)
        cpu_ticks, steal = sum(ticks[:8]), (ticks[7] if len(ticks) > 7 else None)
    cpu = _proc_fields("/proc/pressure/cpu")
    io = _proc_fields("/proc/pressure/io")
    return HostSample(
        taken_at=now or datetime.now(UTC),
        phase=phase,
        load1=round(load1, 2),
        load5=round(load5, 2),
        load15=round(load15, 2),
        cpus=cpu_count(),
        cpu_ticks=cpu_ticks,
        steal_ticks=steal,
        cpu_some_us=_psi_total(cpu, "some"),
        io_some_us=_psi_total(io, "some"),
        io_full_us=_psi_total(io, "full"),
    )


def _filesystem(path: Path) -> str | None:
    """The type of the filesystem holding path (/proc/self/mounts, longest mount point)."""
    best, kind = "", None
    for line in (_proc_fields("/proc/self/mounts") or [])[:-1]:
        parts = line.split()
        if len(parts) > 2 and str(path).startswith(parts[1]) and len(parts[1]) >= len(best):
            best, kind = parts[1], parts[2]
    return kind


class Probe:
    """Times reads of a file it creates (and removes) in `directory`, and a CPU loop."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = Path(directory or tempfile.gettempdir())
        self.path: Path | None = None
        # tmpfs (and ramfs) have no disk to read from: no cold figure
        self.cold = _filesystem(self.directory) not in ("tmpfs", "ramfs")

    def _file(self) -> Path:
        if self.path is None:
            handle, name = tempfile.mkstemp(prefix="planshift-probe-", dir=self.directory)
            try:
                os.write(handle, os.urandom(PROBE_BLOCKS * BLOCK))
                os.fsync(handle)  # clean pages: the only ones DONTNEED can drop
            finally:
                os.close(handle)
            self.path = Path(name)
        return self.path

    def measure(self) -> tuple[float, float | None, float]:
        """(warm read us, cold read us or None, CPU loop ms)."""
        rng = random.Random(8192)
        handle = os.open(self._file(), os.O_RDONLY)
        try:
            os.pread(handle, PROBE_BLOCKS * BLOCK, 0)  # into the page cache
            offsets = [rng.randrange(PROBE_BLOCKS) * BLOCK for _ in range(WARM_READS)]
            started = time.perf_counter()
            for offset in offsets:
                os.pread(handle, BLOCK, offset)
            warm = (time.perf_counter() - started) * 1e6 / WARM_READS
            cold = None
            if self.cold and hasattr(os, "posix_fadvise"):
                os.posix_fadvise(handle, 0, 0, os.POSIX_FADV_DONTNEED)
                os.posix_fadvise(handle, 0, 0, os.POSIX_FADV_RANDOM)
                offsets = rng.sample(range(PROBE_BLOCKS), COLD_READS)
                started = time.perf_counter()
                for block in offsets:
                    os.pread(handle, BLOCK, block * BLOCK)
                cold = (time.perf_counter() - started) * 1e6 / COLD_READS
        finally:
            os.close(handle)
        return warm, cold, cpu_loop_ms()

    def close(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None


def cpu_loop_ms() -> float:
    started = time.perf_counter()
    total = 0
    for i in range(CPU_LOOP):
        total += i * i % 7
    return (time.perf_counter() - started) * 1000.0


def probed(probe: Probe, phase: str) -> HostSample:
    """A reading with the probe's figures."""
    warm, cold, cpu = probe.measure()
    return replace(
        read_host(phase),
        read_warm_us=round(warm, 3),
        read_cold_us=None if cold is None else round(cold, 3),
        cpu_loop_ms=round(cpu, 3),
    )


def calibrate(
    rounds: int = 5, directory: Path | None = None
) -> tuple[HostSample, list[HostSample]]:
    """The probe `rounds` times: (the median figures as one reading, every round's reading)."""
    probe = Probe(directory)
    try:
        first = read_host("start")
        readings = [probed(probe, "during") for _ in range(rounds)]
    finally:
        probe.close()
    last = readings[-1]

    def median(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return statistics.median(known) if known else None

    summary = replace(
        last,
        read_warm_us=median([r.read_warm_us for r in readings]),
        read_cold_us=median([r.read_cold_us for r in readings]),
        cpu_loop_ms=median([r.cpu_loop_ms for r in readings]),
    )
    return summary, [first, *readings]


def is_local(conninfo: str, source: str) -> bool:
    """Does the server run on this host? Embedded clusters do; a DSN does when it names a
    unix socket directory, localhost or no host at all."""
    if source == "embedded":
        return True
    try:
        params = conninfo_to_dict(conninfo)
    except Exception:
        return False
    hosts = str(params.get("hostaddr") or params.get("host") or "").split(",")
    return all(host.startswith("/") or host in LOCAL_HOSTS for host in hosts)


class HostSink(Protocol):
    def add_host_samples(self, run_id: int, samples: Sequence[HostSample]) -> None: ...


class HostMonitor:
    """The host readings of one run, and its pauses for load (see the module docstring)."""

    def __init__(
        self,
        run_id: int,
        *,
        every_s: float = 5.0,
        max_load: float | None = None,
        max_wait_s: float = 300.0,
        say: Callable[[str], None] | None = None,
        probe: Probe | None = None,
    ) -> None:
        self.run_id = run_id
        self.every_s = every_s
        self.max_load = max_load
        self.max_wait_s = max_wait_s
        self.say = say or (lambda text: None)
        self.probe = probe or Probe()
        self.samples: list[HostSample] = []
        self.last = time.monotonic()
        self.waited_s = 0.0
        self.finished = False

    def start(self) -> None:
        self.samples.append(probed(self.probe, "start"))
        self.last = time.monotonic()

    def tick(self) -> None:
        """A reading when the last one is `every_s` old; a pause first when the load is high."""
        self.pause_for_load()
        if time.monotonic() - self.last >= self.every_s:
            self.samples.append(read_host("during"))
            self.last = time.monotonic()

    def pause_for_load(self) -> None:
        if self.max_load is None or self.waited_s >= self.max_wait_s:
            return
        load = os.getloadavg()[0]
        if load <= self.max_load:
            return
        started = time.monotonic()
        told = float("-inf")
        while load > self.max_load:
            waited = time.monotonic() - started
            left = self.max_wait_s - self.waited_s - waited
            if left <= 0:
                self.say(
                    f"waited the most --max-wait allows ({self.max_wait_s:g} s in all): "
                    f"measuring on at load {load:.1f}; the report will say how busy the host was"
                )
                break
            if waited - told >= 10.0:
                self.say(
                    f"paused: 1-minute load {load:.1f} > --max-load {self.max_load:g} "
                    f"({waited:.0f} s so far; at most {left:.0f} s more)"
                )
                told = waited
            time.sleep(min(1.0, left))
            load = os.getloadavg()[0]
        waited = time.monotonic() - started
        self.waited_s += waited
        self.samples.append(
            replace(read_host("wait"), waited_s=round(waited, 2), max_load=self.max_load)
        )

    def finish(self, sink: HostSink, *, probe: bool = True) -> None:
        """The end reading (with the probe when the run completed), all readings stored."""
        self.finished = True
        try:
            self.samples.append(probed(self.probe, "end") if probe else read_host("end"))
        finally:
            self.probe.close()
        sink.add_host_samples(self.run_id, self.samples)
