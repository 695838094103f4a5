-- planshift store, schema version 9: the host a run measured on, and each host's quiet baseline.
--
-- A busy host changes the physics, not only the noise: on a saturated 2-core machine a bitmap
-- heap scan's single-block reads cost ~12 us against ~5 us quiet, enough to reverse the ranking
-- of two plans. A run samples its host (load, CPU and I/O pressure, steal, and a short read and
-- CPU probe at its start and end); `planshift calibrate` records the same probe on a quiet host.
-- `planshift compare` puts the two side by side and says which verdicts a busy host put at risk.

CREATE TABLE host_samples (
    run_id BIGINT NOT NULL,
    taken_at TIMESTAMP NOT NULL,
    phase VARCHAR NOT NULL CHECK (phase IN ('start', 'during', 'end', 'wait')),
    load1 DOUBLE NOT NULL,
    load5 DOUBLE NOT NULL,
    load15 DOUBLE NOT NULL,
    cpus INTEGER NOT NULL,
    cpu_ticks BIGINT,
    steal_ticks BIGINT,
    cpu_some_us BIGINT,
    io_some_us BIGINT,
    io_full_us BIGINT,
    read_warm_us DOUBLE,
    read_cold_us DOUBLE,
    cpu_loop_ms DOUBLE,
    waited_s DOUBLE,
    max_load DOUBLE
);
COMMENT ON TABLE host_samples IS 'Readings of the host planshift ran on, taken during a run: at its start and end (with a read and CPU probe) and every few seconds while measuring; wait rows record pauses of run --max-load.';
COMMENT ON COLUMN host_samples.run_id IS 'The run (runs.run_id); runs.host names the host.';
COMMENT ON COLUMN host_samples.taken_at IS 'When the reading was taken (UTC); for a wait row, when the wait ended.';
COMMENT ON COLUMN host_samples.phase IS 'start (before the first measured execution) | during (while measuring) | end (after the last) | wait (measuring paused by run --max-load).';
COMMENT ON COLUMN host_samples.load1 IS 'Load average over 1 minute (/proc/loadavg): runnable plus uninterruptible tasks.';
COMMENT ON COLUMN host_samples.load5 IS 'Load average over 5 minutes.';
COMMENT ON COLUMN host_samples.load15 IS 'Load average over 15 minutes.';
COMMENT ON COLUMN host_samples.cpus IS 'CPUs this process may run on (sched_getaffinity).';
COMMENT ON COLUMN host_samples.cpu_ticks IS 'Cumulative CPU time of all CPUs in clock ticks (/proc/stat, all states); NULL when unreadable.';
COMMENT ON COLUMN host_samples.steal_ticks IS 'Cumulative CPU time stolen by the hypervisor (/proc/stat steal), clock ticks.';
COMMENT ON COLUMN host_samples.cpu_some_us IS 'Cumulative time some task waited for a CPU (/proc/pressure/cpu some total), microseconds; NULL without PSI.';
COMMENT ON COLUMN host_samples.io_some_us IS 'Cumulative time some task waited on I/O (/proc/pressure/io some total), microseconds.';
COMMENT ON COLUMN host_samples.io_full_us IS 'Cumulative time all non-idle tasks waited on I/O at once (/proc/pressure/io full total), microseconds.';
COMMENT ON COLUMN host_samples.read_warm_us IS 'Probe: mean time of an 8 KiB pread from the OS page cache, microseconds (start and end rows only).';
COMMENT ON COLUMN host_samples.read_cold_us IS 'Probe: mean time of an 8 KiB pread of a block dropped from the page cache (from the disk), microseconds.';
COMMENT ON COLUMN host_samples.cpu_loop_ms IS 'Probe: wall time of a fixed CPU-bound loop, milliseconds.';
COMMENT ON COLUMN host_samples.waited_s IS 'wait rows: seconds measuring paused because the 1-minute load exceeded max_load.';
COMMENT ON COLUMN host_samples.max_load IS 'wait rows: the run --max-load threshold; a wait that reached the bound (run --max-wait) has waited_s at it.';

CREATE TABLE host_baselines (
    host VARCHAR NOT NULL,
    measured_at TIMESTAMP NOT NULL,
    read_warm_us DOUBLE NOT NULL,
    read_cold_us DOUBLE,
    cpu_loop_ms DOUBLE NOT NULL,
    load1 DOUBLE NOT NULL,
    cpus INTEGER NOT NULL,
    cpu_pressure DOUBLE,
    forced BOOLEAN NOT NULL
);
COMMENT ON TABLE host_baselines IS 'Quiet baselines recorded by `planshift calibrate`: the run probe on an idle host; compare uses the latest of the run''s host.';
COMMENT ON COLUMN host_baselines.host IS 'Host name (as runs.host).';
COMMENT ON COLUMN host_baselines.measured_at IS 'When the baseline was measured (UTC).';
COMMENT ON COLUMN host_baselines.read_warm_us IS 'Median over the probe rounds of the mean 8 KiB pread time from the page cache, microseconds.';
COMMENT ON COLUMN host_baselines.read_cold_us IS 'The same for blocks dropped from the page cache; NULL when they could not be dropped.';
COMMENT ON COLUMN host_baselines.cpu_loop_ms IS 'Median wall time of the fixed CPU loop, milliseconds.';
COMMENT ON COLUMN host_baselines.load1 IS '1-minute load average while calibrating.';
COMMENT ON COLUMN host_baselines.cpus IS 'CPUs available while calibrating.';
COMMENT ON COLUMN host_baselines.cpu_pressure IS 'Share of the calibration time some task waited for a CPU (PSI); NULL without PSI.';
COMMENT ON COLUMN host_baselines.forced IS 'True when calibrate --force recorded it although the host was not quiet.';
