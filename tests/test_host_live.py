"""Host conditions on real PostgreSQL 15, through the command line.

With CPU burners beside it (processes this test starts and always kills), a run records its
host's readings, and the comparison's header and JSON show the host's load, CPUs and read
latency; when the recorded conditions say busy, the verdict on the I/O-bound plan flip says so
(PS203). No assertion is about speed: the busy decision is asserted from what was recorded
(tests/test_host.py tests it by its inputs). Two runs measured with and without per-node
timing compare without a PS200 error."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import planshift

from collectors.host import cpu_count
from collectors.servers.embedded import EmbeddedCluster
from detector.store import Store

# random_page_cost 4 -> 30 flips a 5% range over a fillfactor-10 table (40 MB, shared_buffers
# 16 MB) from a Bitmap Heap Scan to a Seq Scan; unprimed, both plans read blocks
IO_FLIP = """
[workload]
name = "io-flip"
repetitions = 8
warmup = 1
seed = 7
prime = false
{timing}

[[targets]]
name = "pg15"
postgres = "15"
settings = {{ shared_buffers = "16MB" }}

[setup]
sql = '''
DROP TABLE IF EXISTS wide;
CREATE TABLE wide (id int PRIMARY KEY, k int NOT NULL, pad text) WITH (fillfactor = 10);
INSERT INTO wide SELECT i, (hashint4(i) & 1048575) % 20000, repeat('x', 100)
FROM generate_series(1, 20000) i;
CREATE INDEX wide_k ON wide (k);
VACUUM ANALYZE wide;
'''

[variants.current]
random_page_cost = "4"

[variants.proposed]
random_page_cost = "30"

[[queries]]
name = "range_k"
sql = "SELECT count(pad) FROM wide WHERE k BETWEEN %(lo)s AND %(lo)s + 999"
params = {{ lo = {{ range = [1, 19000] }} }}
"""


@contextmanager
def cpu_burners(count: int) -> Iterator[None]:
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait()


def test_a_busy_host_is_recorded_shown_and_put_beside_io_bound_verdicts(
    tmp_path: Path, pg15: EmbeddedCluster
) -> None:
    store, workload = tmp_path / "s.duckdb", tmp_path / "w.toml"
    workload.write_text(IO_FLIP.format(timing=""))
    calibrated = planshift(
        "calibrate", "--force", "--rounds", "2", "--store", store, "--format", "json"
    )
    assert calibrated.returncode == 0, calibrated.stderr
    baseline = json.loads(calibrated.stdout)
    assert baseline["read_warm_us"] > 0 and baseline["cpu_loop_ms"] > 0
    with cpu_burners(max(4, cpu_count() + 2)):
        refused = planshift("calibrate", "--rounds", "2", "--store", tmp_path / "other.duckdb")
        run = planshift("run", workload, "--store", store)
    assert run.returncode == 0, run.stderr
    with Store(store, read_only=True) as opened:
        readings = opened.host_samples(opened.latest_run_id() or 0)
    assert readings[0].phase == "start" and readings[-1].phase == "end"
    assert readings[0].read_warm_us and readings[0].cpu_loop_ms and readings[0].cpus == cpu_count()

    report = planshift("compare", "--store", store, "--format", "json")
    assert report.returncode in (0, 1), report.stderr
    document = json.loads(report.stdout)
    hosts = [document["conditions"][side]["host"] for side in ("baseline", "candidate")]
    for host in hosts:
        assert host["cpus"] == cpu_count() and len(host["load"]["start"]) == 3
        assert host["reads"]["blocks"] > 0 and host["reads"]["us_per_block"] > 0
        assert host["baseline"]["read_warm_us"] == pytest.approx(baseline["read_warm_us"], abs=0.01)
        assert host["read_latency_ratio"] is not None
    (query,) = document["queries"]
    assert query["plan_changed"], "the workload's plan flip is what this test is about"
    busy = hosts[0]["busy"]
    if hosts[0]["pressure"]["cpu_some"] is not None:
        # more CPU hogs than CPUs: some task always waits for a CPU (PSI), whatever the speed
        assert busy and any("waited for a CPU" in r for r in hosts[0]["busy_reasons"])
        assert refused.returncode == 2 and "is not quiet" in refused.stderr
    caveats = [f for f in document["findings"] if f["code"] == "PS203"]
    assert bool(caveats) == busy
    if busy:
        (caveat,) = caveats
        assert caveat["message"].startswith("the host was busy (")
        assert "reads" in {risk["kind"] for risk in caveat["evidence"]["risks"]}
        assert "the plans read differently (current reads" in caveat["message"]

    terminal = planshift("compare", "--store", store)
    header = terminal.stdout.split("\n\n")[0]
    assert f"({cpu_count()} CPUs), " in header and " s of measuring: load " in header
    assert "reads per block (track_io_timing): current " in header
    assert ("host busy: " in header) == busy
    assert ("PS203 busy-host range_k: the host was busy" in terminal.stdout) == busy


def test_runs_in_different_timing_modes_are_compared_without_a_regression(
    tmp_path: Path, pg15: EmbeddedCluster
) -> None:
    store = tmp_path / "s.duckdb"
    for mode in ("off", "on"):
        workload = tmp_path / f"{mode}.toml"
        workload.write_text(IO_FLIP.format(timing=f'timing = "{mode}"'))
        run = planshift("run", workload, "--store", store, "--variant", "current")
        assert run.returncode == 0, run.stderr
    result = planshift("compare", "--store", store, "-b", "pg15@1", "-c", "pg15@2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PS200" not in result.stdout
    assert (
        "timings not compared: pg15 and pg15 were measured in different modes (timing modes "
        "EXPLAIN ANALYZE, TIMING OFF vs EXPLAIN ANALYZE with per-node timing)" in result.stdout
    )
    as_json = planshift("compare", "--store", store, "-b", "pg15@1", "-c", "pg15@2", "-f", "json")
    document = json.loads(as_json.stdout)
    assert document["method"]["not_comparable"].startswith("timings not compared")
    (query,) = document["queries"]
    assert query["timing"]["verdict"] == "inconclusive"
    assert query["timing"]["summary"].endswith(
        "not compared: measured in different modes (timing modes EXPLAIN ANALYZE, TIMING OFF "
        "vs EXPLAIN ANALYZE with per-node timing)"
    )


@pytest.mark.parametrize("value", ["0", "-1"])
def test_max_load_must_be_positive(tmp_path: Path, value: str) -> None:
    workload = tmp_path / "w.toml"
    workload.write_text(IO_FLIP.format(timing=""))
    result = planshift("run", workload, "--store", tmp_path / "s.duckdb", "--max-load", value)
    assert result.returncode == 2 and "--max-load" in result.stderr and "hint:" in result.stderr
