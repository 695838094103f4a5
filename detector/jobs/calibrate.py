"""The calibrate job: this host's quiet baseline into the store."""

from __future__ import annotations

import socket
from pathlib import Path

from collectors.host import calibrate
from detector.errors import PlanshiftError
from detector.model.host import HostBaseline, summarize
from detector.store import Store


def calibrate_host(*, store_path: Path, rounds: int, force: bool) -> HostBaseline:
    """Probe this host `rounds` times and store the medians as its quiet baseline; refuse
    (unless forced) when the host is busy by the measures compare uses."""
    if rounds < 1:
        raise PlanshiftError(f"--rounds {rounds}: expected 1 or more", "for example --rounds 5")
    summary, readings = calibrate(rounds)
    host = socket.gethostname()
    now = summarize(
        readings, host=host, local=True, baseline=None, read_blocks=0, read_ms=None, cold=False
    )
    reasons = [] if now is None else [r.text for r in now.busy_reasons()]
    if reasons and not force:
        raise PlanshiftError(
            f"host {host} is not quiet: {'; '.join(reasons)}; a baseline measured now would "
            "make busy runs look normal",
            "run `planshift calibrate` when the host is idle, or add --force to record it "
            "anyway (marked forced)",
        )
    assert summary.read_warm_us is not None and summary.cpu_loop_ms is not None
    baseline = HostBaseline(
        host=host,
        measured_at=summary.taken_at,
        read_warm_us=summary.read_warm_us,
        read_cold_us=summary.read_cold_us,
        cpu_loop_ms=summary.cpu_loop_ms,
        load1=summary.load1,
        cpus=summary.cpus,
        cpu_pressure=None if now is None else now.cpu_pressure,
        forced=bool(reasons),
    )
    with Store(store_path) as store:
        store.add_host_baseline(baseline)
    return baseline
