"""Host conditions without a server: the busy decision by its inputs, the summary of a run's
readings, the probe, pauses for load, the store's tables, comparable sides and configuration.
The same on real PostgreSQL with CPU burners beside it: tests/test_host_live.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers import new_run

import collectors.host as host_module
from collectors.host import HostMonitor, Probe, is_local, read_host
from detector.engine.comparison.conditions import not_comparable
from detector.engine.comparison.config import parse_config
from detector.errors import PlanshiftError
from detector.model.host import BUSY, HostBaseline, HostConditions, HostSample, summarize
from detector.model.records import TargetRecord
from detector.store import Store

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
QUIET = HostConditions(
    host="h",
    local=True,
    cpus=2,
    load_start=(0.4, 0.3, 0.2),
    load_end=(0.6, 0.4, 0.2),
    load_mean=0.5,
    load_max=0.6,
    seconds=30.0,
    steal=0.0,
    cpu_pressure=0.02,
    io_pressure=0.01,
    read_warm_us=1.5,
    read_cold_us=80.0,
    cpu_loop_ms=30.0,
    baseline=HostBaseline(
        "h", T0, read_warm_us=1.4, read_cold_us=75.0, cpu_loop_ms=29.0, load1=0.2, cpus=2
    ),
)


def reasons(conditions: HostConditions) -> list[str]:
    return [reason.text for reason in conditions.busy_reasons()]


def test_a_quiet_host_is_not_busy() -> None:
    assert reasons(QUIET) == [] and not QUIET.busy


@pytest.mark.parametrize(
    ("changes", "kind", "text"),
    [
        ({"load_mean": 2.0}, "cpu", "load 1.0 per CPU (2.0 on 2 CPUs) >= 1.0"),
        ({"cpu_pressure": 0.25}, "cpu", "tasks waited for a CPU 25% of the time >= 25%"),
        ({"steal": 0.07}, "cpu", "the hypervisor took the CPUs (steal) 7% of the time >= 5%"),
        ({"io_pressure": 0.12}, "io", "tasks waited on I/O 12% of the time >= 10%"),
        (
            {"read_warm_us": 2.8},
            "io",
            "the probe's warm reads took 2.0x as long as on the quiet host >= 2x",
        ),
        ({"read_cold_us": 300.0}, "io", "the probe's cold reads took 4.0x as long"),
        ({"cpu_loop_ms": 87.0}, "cpu", "the probe's CPU loop took 3.0x as long"),
    ],
)
def test_each_busy_criterion_at_its_threshold(
    changes: dict[str, Any], kind: str, text: str
) -> None:
    busy = replace(QUIET, **changes)
    found = busy.busy_reasons()
    assert len(found) == 1 and found[0].kind == kind and text in found[0].text, found
    assert busy.busy


def test_just_below_every_threshold_is_quiet() -> None:
    below = replace(
        QUIET,
        load_mean=BUSY["load_per_cpu"] * 2 - 0.01,
        cpu_pressure=BUSY["cpu_pressure"] - 0.001,
        steal=BUSY["steal"] - 0.001,
        io_pressure=BUSY["io_pressure"] - 0.001,
        read_warm_us=1.4 * BUSY["probe_slowdown"] - 0.01,
    )
    assert reasons(below) == []


def test_a_remote_server_is_never_called_busy_by_this_hosts_figures() -> None:
    assert reasons(replace(QUIET, local=False, load_mean=9.0, cpu_pressure=1.0)) == []


def test_cold_trials_wait_on_io_by_design_and_hold_reads_against_the_cold_probe() -> None:
    cold = replace(QUIET, cold=True, io_pressure=0.6, read_cold_us=160.0)
    assert [r.kind for r in cold.busy_reasons()] == ["io"]  # the probe, not the pressure
    assert cold.read_slowdown == pytest.approx(160.0 / 75.0)
    assert replace(QUIET, read_warm_us=2.1).read_slowdown == pytest.approx(1.5)


def test_without_a_quiet_baseline_the_probe_decides_nothing() -> None:
    alone = replace(QUIET, baseline=None, read_warm_us=50.0, cpu_loop_ms=500.0)
    assert reasons(alone) == [] and alone.read_slowdown is None
    assert alone.as_dict()["baseline"] is None


def test_as_dict_carries_load_cpus_read_latency_and_the_baseline() -> None:
    busy = replace(QUIET, load_mean=5.2, read_blocks=5000, read_ms=60.0)
    document = busy.as_dict()
    assert document["cpus"] == 2 and document["load"]["per_cpu"] == 2.6
    assert document["reads"] == {
        "blocks": 5000,
        "io_ms": 60.0,
        "us_per_block": 12.0,
        "cache": "warm",
    }
    assert document["baseline"]["read_warm_us"] == 1.4
    assert document["busy"] is True and document["busy_reasons"] == reasons(busy)


def sample(seconds: float, phase: str = "during", **values: Any) -> HostSample:
    fields: dict[str, Any] = {"load1": 1.0, "load5": 1.0, "load15": 1.0, "cpus": 2, **values}
    return HostSample(T0 + timedelta(seconds=seconds), phase, **fields)


def test_summary_shares_come_from_the_counters_over_the_measuring_time() -> None:
    samples = [
        sample(0, "start", load1=2.0, cpu_ticks=1000, steal_ticks=10, cpu_some_us=0, io_some_us=0,
               read_warm_us=2.0, read_cold_us=90.0, cpu_loop_ms=30.0),
        sample(5, load1=4.0),
        sample(7, "wait", waited_s=3.5, max_load=3.0),
        sample(10, "end", load1=6.0, cpu_ticks=3000, steal_ticks=110, cpu_some_us=5_000_000,
               io_some_us=1_000_000, read_warm_us=3.0, read_cold_us=70.0, cpu_loop_ms=45.0),
    ]  # fmt: skip
    found = summarize(
        samples, host="h", local=True, baseline=None, read_blocks=100, read_ms=1.2, cold=False
    )
    assert found is not None
    assert found.seconds == 10.0 and found.load_start[0] == 2.0 and found.load_end[0] == 6.0
    assert found.load_mean == 4.0 and found.load_max == 6.0
    assert found.steal == pytest.approx(0.05) and found.cpu_pressure == pytest.approx(0.5)
    assert found.io_pressure == pytest.approx(0.1)
    assert (found.read_warm_us, found.read_cold_us, found.cpu_loop_ms) == (3.0, 90.0, 45.0)
    assert (found.waits, found.waited_s, found.max_load) == (1, 3.5, 3.0)
    assert found.read_us == pytest.approx(12.0)
    assert (
        summarize([], host="h", local=True, baseline=None, read_blocks=0, read_ms=None, cold=False)
        is None
    )


def test_read_host_reads_this_host() -> None:
    reading = read_host("start")
    assert reading.cpus >= 1 and reading.load1 >= 0 and reading.phase == "start"
    if Path("/proc/pressure/cpu").exists():
        assert reading.cpu_some_us is not None


def test_the_probe_times_reads_and_removes_its_file(tmp_path: Path) -> None:
    probe = Probe(tmp_path)
    warm, cold, cpu = probe.measure()
    assert warm > 0 and cpu > 0 and (cold is None or cold > 0)
    assert probe.path is not None and probe.path.parent == tmp_path
    probe.close()
    assert list(tmp_path.iterdir()) == []


def test_the_probe_has_no_disk_to_read_on_tmpfs() -> None:
    if not Path("/dev/shm").is_dir() or host_module._filesystem(Path("/dev/shm")) != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm")
    probe = Probe(Path("/dev/shm"))
    try:
        assert probe.measure()[1] is None
    finally:
        probe.close()


class Sink:
    def __init__(self) -> None:
        self.stored: list[HostSample] = []

    def add_host_samples(self, run_id: int, samples: Any) -> None:
        self.stored += samples


def test_a_pause_for_load_is_bounded_said_and_recorded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(host_module.os, "getloadavg", lambda: (9.0, 9.0, 9.0))  # a busy host
    said: list[str] = []
    monitor = HostMonitor(1, max_load=4.0, max_wait_s=0.3, say=said.append, probe=Probe(tmp_path))
    monitor.start()
    monitor.tick()
    monitor.tick()  # the bound is spent: measuring goes on
    sink = Sink()
    monitor.finish(sink)
    waits = [s for s in sink.stored if s.phase == "wait"]
    assert len(waits) == 1 and waits[0].max_load == 4.0
    assert 0.3 <= (waits[0].waited_s or 0) < 5
    assert [s.phase for s in sink.stored if s.phase != "wait"] == ["start", "end"]
    assert "paused: 1-minute load 9.0 > --max-load 4" in said[0]
    assert "waited the most --max-wait allows" in said[-1]
    assert list(tmp_path.iterdir()) == []  # the probe's file is gone


def test_no_pause_below_the_threshold(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(host_module.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    monitor = HostMonitor(1, max_load=4.0, probe=Probe(tmp_path))
    monitor.start()
    monitor.tick()
    sink = Sink()
    monitor.finish(sink)
    assert [s.phase for s in sink.stored] == ["start", "end"]


@pytest.mark.parametrize(
    ("conninfo", "source", "local"),
    [
        ("", "embedded", True),
        ("host=/tmp/sock dbname=x", "dsn", True),
        ("postgresql://app@localhost/app", "dsn", True),
        ("host=db1.example.com dbname=x", "dsn", False),
        ("host=/tmp/s,db2 dbname=x", "dsn", False),
    ],
)
def test_which_servers_run_on_this_host(conninfo: str, source: str, local: bool) -> None:
    assert is_local(conninfo, source) is local


def test_the_store_keeps_readings_and_baselines(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store:
        (target,) = new_run(store)
        readings = [sample(0, "start", cpu_some_us=5, read_warm_us=1.5), sample(9, "end")]
        store.add_host_samples(1, readings)
        assert store.host_samples(1) == readings and store.host_samples(2) == []
        assert store.host_baseline("h") is None
        older = HostBaseline("h", T0, 1.4, None, 29.0, 0.2, 2)
        store.add_host_baseline(older)
        store.add_host_baseline(
            replace(older, measured_at=T0 + timedelta(days=1), read_warm_us=1.6)
        )
        assert store.host_baseline("h") == replace(
            older, measured_at=T0 + timedelta(days=1), read_warm_us=1.6
        )
        assert store.side_reads(target) == (0, None)


def target(name: str, timing: str | None, cache: str | None) -> TargetRecord:
    info: dict[str, Any] = {} if timing is None else {"timing": timing}
    if cache is not None:
        info["cache"] = {"mode": cache}
    return TargetRecord(1, 1, name, "embedded", 150000, {}, info)


def test_sides_measured_in_different_modes_are_not_compared() -> None:
    off, on = target("a", "off", "warm"), target("b", "on", "warm")
    reason, line = not_comparable(off, on) or ("", "")
    assert reason == (
        "not compared: measured in different modes (timing modes EXPLAIN ANALYZE, TIMING OFF vs "
        "EXPLAIN ANALYZE with per-node timing)"
    )
    assert "per-node timing costs time in proportion to the rows a plan moves" in line
    cold = not_comparable(target("a", "off", "warm"), target("b", "off", "cold"))
    assert cold is not None and "cache warm vs cold" in cold[0]
    assert not_comparable(off, target("c", "off", "warm")) is None
    assert not_comparable(off, target("d", None, None)) is None  # not recorded: unknown


def test_busy_host_configuration() -> None:
    assert parse_config(Path("planshift.toml"), {}).busy_host == "warn"
    assert parse_config(Path("planshift.toml"), {"busy-host": "fail"}).busy_host == "fail"
    with pytest.raises(PlanshiftError, match="busy-host: unknown value 'never'"):
        parse_config(Path("planshift.toml"), {"busy-host": "never"})


def test_report_lines_say_the_host_once_when_both_sides_shared_it() -> None:
    from detector.model import ComparisonResult
    from detector.reports.common import condition_lines

    busy = replace(QUIET, load_mean=5.2, read_blocks=5000, read_ms=60.0).as_dict()
    shared = ComparisonResult(
        "current", "proposed", (1,), (), (),
        conditions={"baseline": {"host": busy}, "candidate": {"host": {**busy, "reads": {"blocks": 0}}}},
    )  # fmt: skip
    lines = condition_lines(shared)
    assert lines[0].startswith("host h (2 CPUs), 30.0 s of measuring: load 0.4 -> 0.6")
    assert (
        "probe: page-cache read 1.5 us, disk read 80 us, CPU loop 30 ms (quiet: 1.4 us" in lines[0]
    )
    assert lines[1] == (
        "host busy: load 2.6 per CPU (5.2 on 2 CPUs) >= 1.0 (see PS203 for the verdicts at risk)"
    )
    assert lines[2] == (
        "reads per block (track_io_timing): current 12 us/block over 5,000 blocks (warm); "
        "proposed read no blocks from outside shared buffers"
    )
    from markupsafe import escape

    from detector.reports import render

    page = render("html", shared)  # the HTML report says the same, under Targets
    assert all(f"<p>{escape(line)}</p>" in page for line in lines)
    two_runs = replace(
        shared, conditions={"baseline": {"host": QUIET.as_dict()}, "candidate": {"host": busy}}
    )
    lines = condition_lines(two_runs)
    assert lines[1] == "current: host quiet by every measure taken"
    assert lines[3].startswith("proposed: host busy: load 2.6 per CPU")
    remote = replace(
        shared, conditions={"baseline": {"host": replace(QUIET, local=False).as_dict()}}
    )
    assert (
        "the server runs on another host, whose load was not measured" in condition_lines(remote)[1]
    )
