-- The schema of a planshift store at version 12, generated from
-- detector/store/migrations/ by scripts/store_schema.py: do not edit (tests/test_docs.py
-- checks it is current). Every table and column has a comment; read it in a store with
-- SELECT table_name, column_name, comment FROM duckdb_columns() WHERE NOT internal;
CREATE SEQUENCE comparison_id_seq INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START 1 NO CYCLE;
CREATE SEQUENCE log_file_id_seq INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START 1 NO CYCLE;
CREATE SEQUENCE observation_id_seq INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START 1 NO CYCLE;
CREATE SEQUENCE pgss_snapshot_id_seq INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START 1 NO CYCLE;
CREATE SEQUENCE query_failure_id_seq INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START 1 NO CYCLE;
CREATE SEQUENCE run_id_seq INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START 1 NO CYCLE;
CREATE SEQUENCE target_id_seq INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START 1 NO CYCLE;

CREATE TABLE comparisons(
    comparison_id BIGINT DEFAULT(nextval('comparison_id_seq')) PRIMARY KEY,
    created_at TIMESTAMP NOT NULL,
    baseline VARCHAR NOT NULL,
    candidate VARCHAR NOT NULL,
    run_ids JSON NOT NULL
);
COMMENT ON TABLE comparisons IS 'One evaluation of a candidate against a baseline; its findings are in findings.';
COMMENT ON COLUMN comparisons.comparison_id IS 'Comparison id (sequence comparison_id_seq).';
COMMENT ON COLUMN comparisons.created_at IS 'When the comparison was made (UTC).';
COMMENT ON COLUMN comparisons.baseline IS 'Baseline target name.';
COMMENT ON COLUMN comparisons.candidate IS 'Candidate target name.';
COMMENT ON COLUMN comparisons.run_ids IS 'JSON list of the run ids whose observations were compared.';

CREATE TABLE findings(
    comparison_id BIGINT,
    "position" INTEGER,
    code VARCHAR NOT NULL,
    "name" VARCHAR NOT NULL,
    severity VARCHAR NOT NULL,
    query_key VARCHAR NOT NULL,
    query_name VARCHAR NOT NULL,
    message VARCHAR NOT NULL,
    evidence JSON NOT NULL,
    point VARCHAR,
    CHECK((severity IN ('info', 'warning', 'error'))),
    PRIMARY KEY(comparison_id, "position")
);
COMMENT ON TABLE findings IS 'What the rules found in a comparison, in report order.';
COMMENT ON COLUMN findings.comparison_id IS 'The comparison (comparisons.comparison_id).';
COMMENT ON COLUMN findings.position IS 'Order of the finding in the report (0 first: most severe).';
COMMENT ON COLUMN findings.code IS 'Stable rule code; `planshift rules CODE` explains it.';
COMMENT ON COLUMN findings.name IS 'Kebab-case rule name, e.g. "index-to-bitmap".';
COMMENT ON COLUMN findings.severity IS 'info | warning | error.';
COMMENT ON COLUMN findings.query_key IS 'The query concerned (queries.query_key).';
COMMENT ON COLUMN findings.query_name IS 'The query''s human name at the time of the comparison.';
COMMENT ON COLUMN findings.message IS 'One line: what changed from -> to, where, with the measured numbers.';
COMMENT ON COLUMN findings.evidence IS 'JSON object of the numbers and plan details behind the finding.';
COMMENT ON COLUMN findings.point IS 'Sweep point of the query comparison, e.g. "N=8000"; NULL outside sweeps.';

CREATE TABLE host_baselines(
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

CREATE TABLE host_samples(
    run_id BIGINT NOT NULL,
    taken_at TIMESTAMP NOT NULL,
    phase VARCHAR NOT NULL,
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
    max_load DOUBLE,
    CHECK((phase IN ('start', 'during', 'end', 'wait')))
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

CREATE TABLE log_entries(
    observation_id BIGINT PRIMARY KEY,
    file_id BIGINT NOT NULL,
    line BIGINT NOT NULL,
    byte_offset BIGINT NOT NULL,
    pid INTEGER,
    "database" VARCHAR,
    user_name VARCHAR,
    queryid BIGINT,
    plan_format VARCHAR NOT NULL,
    analyzed BOOLEAN NOT NULL,
    settings VARCHAR,
    generic BOOLEAN,
    CHECK((plan_format IN ('json', 'text')))
);
COMMENT ON TABLE log_entries IS 'Where each observation with source = log came from: file, line, backend, database, user, queryid.';
COMMENT ON COLUMN log_entries.observation_id IS 'The observation (observations.observation_id).';
COMMENT ON COLUMN log_entries.file_id IS 'The log file (log_files.file_id).';
COMMENT ON COLUMN log_entries.line IS 'Line number (1-based) where the entry starts.';
COMMENT ON COLUMN log_entries.byte_offset IS 'Uncompressed byte offset where the entry starts.';
COMMENT ON COLUMN log_entries.pid IS 'Backend process id (%p in log_line_prefix, pid in csvlog and jsonlog).';
COMMENT ON COLUMN log_entries.database IS 'Database name (%d, or the csvlog / jsonlog field); NULL when the log does not say.';
COMMENT ON COLUMN log_entries.user_name IS 'User name (%u, or the csvlog / jsonlog field); NULL when the log does not say.';
COMMENT ON COLUMN log_entries.queryid IS 'Query identifier (%Q, csvlog / jsonlog query_id, or "Query Identifier" of verbose plans); NULL when unknown.';
COMMENT ON COLUMN log_entries.plan_format IS 'auto_explain.log_format of the entry: json | text.';
COMMENT ON COLUMN log_entries.analyzed IS 'True when the plan has actual rows and times (auto_explain.log_analyze = on).';
COMMENT ON COLUMN log_entries.settings IS 'The plan''s Settings (auto_explain.log_settings, 15+) as name = ''value'', ...; NULL when not logged or all defaults.';
COMMENT ON COLUMN log_entries.generic IS 'True when the plan is a prepared statement''s generic plan (its conditions reference $1, $2 ... instead of values); NULL for entries ingested before schema version 9.';

CREATE TABLE log_events(
    file_id BIGINT,
    line BIGINT NOT NULL,
    byte_offset BIGINT,
    logged_at TIMESTAMP,
    pid INTEGER,
    "database" VARCHAR,
    kind VARCHAR NOT NULL,
    subject VARCHAR,
    "value" VARCHAR,
    message VARCHAR NOT NULL,
    CHECK((kind IN ('setting', 'reload', 'start', 'autovacuum', 'autoanalyze', 'ddl'))),
    PRIMARY KEY(file_id, byte_offset)
);
COMMENT ON TABLE log_events IS 'Server events read from log files by `planshift ingest`: setting changes, reloads, starts, autovacuum/autoanalyze, DDL (log_statement).';
COMMENT ON COLUMN log_events.file_id IS 'The log file (log_files.file_id).';
COMMENT ON COLUMN log_events.line IS 'Line number (1-based) where the message starts.';
COMMENT ON COLUMN log_events.byte_offset IS 'Uncompressed byte offset where the message starts.';
COMMENT ON COLUMN log_events.logged_at IS 'The message''s time (UTC); NULL when the log line has none.';
COMMENT ON COLUMN log_events.pid IS 'Process id of the server process that logged it (the postmaster for settings and starts).';
COMMENT ON COLUMN log_events.database IS 'Database of the session (DDL), when the log says.';
COMMENT ON COLUMN log_events.kind IS 'setting (parameter changed to) | reload (SIGHUP) | start (starting PostgreSQL, ready to accept connections) | autovacuum | autoanalyze | ddl (a statement: CREATE/DROP INDEX, ALTER TABLE, ANALYZE, VACUUM, CLUSTER, REINDEX).';
COMMENT ON COLUMN log_events.subject IS 'setting: its name; start: the version (NULL on the ready line); autovacuum, autoanalyze, ddl: the table (schema.table as logged; the index name for DROP INDEX; NULL: all tables).';
COMMENT ON COLUMN log_events.value IS 'setting: the new value; NULL otherwise.';
COMMENT ON COLUMN log_events.message IS 'The message''s first line after the prefix (at most 300 characters).';

CREATE TABLE log_files(
    file_id BIGINT DEFAULT(nextval('log_file_id_seq')) PRIMARY KEY,
    path VARCHAR NOT NULL,
    format VARCHAR NOT NULL,
    compressed BOOLEAN NOT NULL,
    head_len BIGINT NOT NULL,
    head_sha256 VARCHAR NOT NULL,
    resume_offset BIGINT NOT NULL,
    resume_line BIGINT NOT NULL,
    high_offset BIGINT NOT NULL,
    pending_starts JSON NOT NULL,
    entries BIGINT NOT NULL,
    "plans" BIGINT NOT NULL,
    problems BIGINT NOT NULL,
    first_ingested_at TIMESTAMP NOT NULL,
    last_ingested_at TIMESTAMP NOT NULL,
    CHECK((format IN ('stderr', 'csvlog', 'jsonlog')))
);
COMMENT ON TABLE log_files IS 'Ingest ledger: one row per server log file read by `planshift ingest`, identified by a hash of its first bytes (renamed or rotated files are recognized).';
COMMENT ON COLUMN log_files.file_id IS 'Log file id (sequence log_file_id_seq).';
COMMENT ON COLUMN log_files.path IS 'Path the file was last ingested from.';
COMMENT ON COLUMN log_files.format IS 'stderr | csvlog | jsonlog.';
COMMENT ON COLUMN log_files.compressed IS 'True when the file is gzip-compressed (offsets count uncompressed bytes).';
COMMENT ON COLUMN log_files.head_len IS 'Number of leading (uncompressed) bytes hashed into head_sha256 (at most 64 KiB).';
COMMENT ON COLUMN log_files.head_sha256 IS 'SHA-256 of the first head_len bytes: the identity of the file.';
COMMENT ON COLUMN log_files.resume_offset IS 'Uncompressed byte offset where the next ingest of this file starts reading.';
COMMENT ON COLUMN log_files.resume_line IS 'Line number (1-based) at resume_offset.';
COMMENT ON COLUMN log_files.high_offset IS 'End offset of the last stored entry; entries starting before it are skipped on resume unless listed in pending_starts.';
COMMENT ON COLUMN log_files.pending_starts IS 'JSON list of start offsets of entries begun before high_offset but not stored yet (interleaved backends).';
COMMENT ON COLUMN log_files.entries IS 'Log entries read so far (all messages, not only plans).';
COMMENT ON COLUMN log_files.plans IS 'auto_explain plans stored as observations so far.';
COMMENT ON COLUMN log_files.problems IS 'Broken entries counted so far (see log_problems).';
COMMENT ON COLUMN log_files.first_ingested_at IS 'When the file was first ingested (UTC).';
COMMENT ON COLUMN log_files.last_ingested_at IS 'When the ledger row was last updated (UTC).';

CREATE TABLE log_problems(
    file_id BIGINT NOT NULL,
    line BIGINT NOT NULL,
    kind VARCHAR NOT NULL,
    message VARCHAR NOT NULL,
    recorded_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE log_problems IS 'Broken input met while ingesting: truncated entries, invalid JSON, unreadable plans, binary garbage. Counted and skipped, never fatal.';
COMMENT ON COLUMN log_problems.file_id IS 'The log file (log_files.file_id).';
COMMENT ON COLUMN log_problems.line IS 'Line number (1-based) where the broken entry starts.';
COMMENT ON COLUMN log_problems.kind IS 'truncated | bad-json | bad-plan | bad-record | garbage | too-large | encoding | bad-time | no-query | bad-gzip | duplicate (a range already stored: not stored again).';
COMMENT ON COLUMN log_problems.message IS 'What was wrong, one line.';
COMMENT ON COLUMN log_problems.recorded_at IS 'When the problem was recorded (UTC).';

CREATE TABLE observations(
    observation_id BIGINT DEFAULT(nextval('observation_id_seq')) PRIMARY KEY,
    run_id BIGINT NOT NULL,
    target_id BIGINT NOT NULL,
    query_key VARCHAR NOT NULL,
    point VARCHAR,
    params JSON NOT NULL,
    sample_index INTEGER NOT NULL,
    fingerprint VARCHAR NOT NULL,
    "source" VARCHAR NOT NULL,
    total_cost DOUBLE NOT NULL,
    startup_cost DOUBLE NOT NULL,
    plan_rows DOUBLE NOT NULL,
    actual_rows DOUBLE,
    duration_ms DOUBLE,
    planning_ms DOUBLE,
    client_ms DOUBLE,
    shared_hit BIGINT NOT NULL,
    shared_read BIGINT NOT NULL,
    shared_dirtied BIGINT NOT NULL,
    shared_written BIGINT NOT NULL,
    temp_read BIGINT NOT NULL,
    temp_written BIGINT NOT NULL,
    exact_heap_blocks BIGINT,
    lossy_heap_blocks BIGINT,
    io_read_ms DOUBLE,
    collected_at TIMESTAMP NOT NULL,
    CHECK(("source" IN ('explain', 'log')))
);
COMMENT ON TABLE observations IS 'One execution (or one logged plan) of one query on one target: the plan shape and the measured numbers.';
COMMENT ON COLUMN observations.observation_id IS 'Observation id (sequence observation_id_seq).';
COMMENT ON COLUMN observations.run_id IS 'The run (runs.run_id); the same as the target''s run.';
COMMENT ON COLUMN observations.target_id IS 'The target it ran on (targets.target_id).';
COMMENT ON COLUMN observations.query_key IS 'The query (queries.query_key).';
COMMENT ON COLUMN observations.point IS 'Sweep point label, e.g. "N=8000"; NULL outside a parameter sweep.';
COMMENT ON COLUMN observations.params IS 'JSON of the bound parameter values (a list or an object).';
COMMENT ON COLUMN observations.sample_index IS 'Repetition number of this execution within (target, query, point), from 0.';
COMMENT ON COLUMN observations.fingerprint IS 'Plan shape executed (plans.fingerprint).';
COMMENT ON COLUMN observations.source IS 'explain (EXPLAIN run by planshift) | log (auto_explain log line).';
COMMENT ON COLUMN observations.total_cost IS 'Planner total cost of the root node, with PostgreSQL <= 17 disable_cost (1e10 per disabled node) removed.';
COMMENT ON COLUMN observations.startup_cost IS 'Planner startup cost of the root node, disable_cost removed.';
COMMENT ON COLUMN observations.plan_rows IS 'Rows estimated by the planner for the root node.';
COMMENT ON COLUMN observations.actual_rows IS 'Rows returned by the root node over all loops; NULL without ANALYZE.';
COMMENT ON COLUMN observations.duration_ms IS 'Server execution time (EXPLAIN ANALYZE Execution Time, or the log line duration), ms.';
COMMENT ON COLUMN observations.planning_ms IS 'Planning time, ms; NULL when not reported.';
COMMENT ON COLUMN observations.client_ms IS 'Wall time around the statement as the client measured it, ms; NULL for logs.';
COMMENT ON COLUMN observations.shared_hit IS 'Shared buffers found in cache (root node, which includes its children).';
COMMENT ON COLUMN observations.shared_read IS 'Shared buffers read from the OS or disk (root node).';
COMMENT ON COLUMN observations.shared_dirtied IS 'Shared buffers dirtied (root node).';
COMMENT ON COLUMN observations.shared_written IS 'Shared buffers written (root node).';
COMMENT ON COLUMN observations.temp_read IS 'Temp blocks read: spills of sorts and hashes (root node).';
COMMENT ON COLUMN observations.temp_written IS 'Temp blocks written (root node).';
COMMENT ON COLUMN observations.exact_heap_blocks IS 'Exact heap blocks summed over all Bitmap Heap Scan nodes; NULL when the plan has none.';
COMMENT ON COLUMN observations.lossy_heap_blocks IS 'Lossy heap blocks summed over all Bitmap Heap Scan nodes (bitmap exceeded work_mem); NULL when none.';
COMMENT ON COLUMN observations.io_read_ms IS 'Time reading shared blocks (track_io_timing; "I/O Read Time" on 15-16, "Shared I/O Read Time" on 17+), ms; NULL when not measured (track_io_timing off; 0 in rows stored before schema 6).';
COMMENT ON COLUMN observations.collected_at IS 'When the execution happened (UTC).';

CREATE TABLE pgss_info(
    snapshot_id BIGINT PRIMARY KEY,
    dealloc BIGINT,
    stats_reset TIMESTAMP
);
COMMENT ON TABLE pgss_info IS 'pg_stat_statements_info read with each snapshot (PostgreSQL 14+): evictions and the last reset.';
COMMENT ON COLUMN pgss_info.snapshot_id IS 'The snapshot (pgss_snapshots.snapshot_id).';
COMMENT ON COLUMN pgss_info.dealloc IS 'Cumulative count of entries evicted because pg_stat_statements.max was reached.';
COMMENT ON COLUMN pgss_info.stats_reset IS 'When pg_stat_statements_reset() last reset all statistics (UTC).';

CREATE TABLE pgss_snapshots(
    snapshot_id BIGINT NOT NULL,
    target_id BIGINT NOT NULL,
    taken_at TIMESTAMP NOT NULL,
    userid BIGINT,
    dbid BIGINT,
    toplevel BOOLEAN,
    queryid BIGINT NOT NULL,
    query VARCHAR,
    calls BIGINT NOT NULL,
    total_exec_time DOUBLE NOT NULL,
    mean_exec_time DOUBLE,
    min_exec_time DOUBLE,
    max_exec_time DOUBLE,
    stddev_exec_time DOUBLE,
    "plans" BIGINT,
    total_plan_time DOUBLE,
    "rows" BIGINT,
    shared_blks_hit BIGINT,
    shared_blks_read BIGINT,
    shared_blks_dirtied BIGINT,
    shared_blks_written BIGINT,
    temp_blks_read BIGINT,
    temp_blks_written BIGINT,
    blk_read_time DOUBLE,
    blk_write_time DOUBLE
);
COMMENT ON TABLE pgss_snapshots IS 'Raw pg_stat_statements counters, one row per statement per snapshot. Counters are cumulative: subtract two snapshots of the same target for a delta.';
COMMENT ON COLUMN pgss_snapshots.snapshot_id IS 'Snapshot id (sequence pgss_snapshot_id_seq), shared by all rows read at once.';
COMMENT ON COLUMN pgss_snapshots.target_id IS 'Server the snapshot was read from (targets.target_id).';
COMMENT ON COLUMN pgss_snapshots.taken_at IS 'When the snapshot was read (UTC).';
COMMENT ON COLUMN pgss_snapshots.userid IS 'pg_stat_statements.userid (role oid).';
COMMENT ON COLUMN pgss_snapshots.dbid IS 'pg_stat_statements.dbid (database oid).';
COMMENT ON COLUMN pgss_snapshots.toplevel IS 'pg_stat_statements.toplevel: executed at top level (14+).';
COMMENT ON COLUMN pgss_snapshots.queryid IS 'pg_stat_statements.queryid; version-specific.';
COMMENT ON COLUMN pgss_snapshots.query IS 'Normalized statement text as pg_stat_statements shows it ($1 for constants).';
COMMENT ON COLUMN pgss_snapshots.calls IS 'Cumulative number of executions.';
COMMENT ON COLUMN pgss_snapshots.total_exec_time IS 'Cumulative execution time, ms.';
COMMENT ON COLUMN pgss_snapshots.mean_exec_time IS 'Mean execution time since the statistics were reset, ms.';
COMMENT ON COLUMN pgss_snapshots.min_exec_time IS 'Minimum execution time since reset, ms.';
COMMENT ON COLUMN pgss_snapshots.max_exec_time IS 'Maximum execution time since reset, ms.';
COMMENT ON COLUMN pgss_snapshots.stddev_exec_time IS 'Standard deviation of execution time since reset, ms.';
COMMENT ON COLUMN pgss_snapshots.plans IS 'Cumulative number of plannings (pg_stat_statements.track_planning).';
COMMENT ON COLUMN pgss_snapshots.total_plan_time IS 'Cumulative planning time, ms.';
COMMENT ON COLUMN pgss_snapshots.rows IS 'Cumulative rows retrieved or affected.';
COMMENT ON COLUMN pgss_snapshots.shared_blks_hit IS 'Cumulative shared buffer hits.';
COMMENT ON COLUMN pgss_snapshots.shared_blks_read IS 'Cumulative shared blocks read.';
COMMENT ON COLUMN pgss_snapshots.shared_blks_dirtied IS 'Cumulative shared blocks dirtied.';
COMMENT ON COLUMN pgss_snapshots.shared_blks_written IS 'Cumulative shared blocks written.';
COMMENT ON COLUMN pgss_snapshots.temp_blks_read IS 'Cumulative temp blocks read.';
COMMENT ON COLUMN pgss_snapshots.temp_blks_written IS 'Cumulative temp blocks written.';
COMMENT ON COLUMN pgss_snapshots.blk_read_time IS 'Cumulative block read time, ms (blk_read_time up to 16, shared_blk_read_time from 17).';
COMMENT ON COLUMN pgss_snapshots.blk_write_time IS 'Cumulative block write time, ms (blk_write_time up to 16, shared_blk_write_time from 17).';

CREATE TABLE plan_examples(
    target_id BIGINT NOT NULL,
    query_key VARCHAR NOT NULL,
    point VARCHAR,
    fingerprint VARCHAR NOT NULL,
    plan_json JSON NOT NULL
);
COMMENT ON TABLE plan_examples IS 'The first full EXPLAIN (FORMAT JSON) of each target x query x sweep point x plan shape.';
COMMENT ON COLUMN plan_examples.target_id IS 'The target that produced it (targets.target_id).';
COMMENT ON COLUMN plan_examples.query_key IS 'The query (queries.query_key).';
COMMENT ON COLUMN plan_examples.point IS 'Sweep point label, e.g. "N=8000"; NULL outside sweeps.';
COMMENT ON COLUMN plan_examples.fingerprint IS 'The plan shape (plans.fingerprint).';
COMMENT ON COLUMN plan_examples.plan_json IS 'EXPLAIN output as PostgreSQL returned it, with this execution''s actual rows, buffers and timings.';

CREATE TABLE plan_nodes(
    fingerprint VARCHAR,
    path VARCHAR,
    parent_path VARCHAR,
    node_type VARCHAR NOT NULL,
    relation VARCHAR,
    index_name VARCHAR,
    join_type VARCHAR,
    strategy VARCHAR,
    partial_mode VARCHAR,
    parent_relationship VARCHAR,
    scan_direction VARCHAR,
    cte_name VARCHAR,
    subplan_name VARCHAR,
    PRIMARY KEY(fingerprint, path)
);
COMMENT ON TABLE plan_nodes IS 'The nodes of each plan shape, one row per node: find every plan that scans a table or uses an index.';
COMMENT ON COLUMN plan_nodes.fingerprint IS 'The plan (plans.fingerprint).';
COMMENT ON COLUMN plan_nodes.path IS 'Position in the tree: child indexes from the root, "0" is the root, "0.1.0" its second child''s first child.';
COMMENT ON COLUMN plan_nodes.parent_path IS 'path of the parent node; NULL for the root.';
COMMENT ON COLUMN plan_nodes.node_type IS 'EXPLAIN Node Type, e.g. "Index Scan" (the old "Result Cache" is stored as "Memoize").';
COMMENT ON COLUMN plan_nodes.relation IS 'Relation read by the node, schema-qualified when EXPLAIN VERBOSE gave the schema.';
COMMENT ON COLUMN plan_nodes.index_name IS 'Index used by the node (Index Scan, Index Only Scan, Bitmap Index Scan).';
COMMENT ON COLUMN plan_nodes.join_type IS 'Join Type: Inner, Left, Semi, Anti, ...';
COMMENT ON COLUMN plan_nodes.strategy IS 'Strategy of Aggregate / SetOp nodes: Plain, Sorted, Hashed, Mixed.';
COMMENT ON COLUMN plan_nodes.partial_mode IS 'Partial Mode of parallel aggregates: Partial, Finalize, Simple.';
COMMENT ON COLUMN plan_nodes.parent_relationship IS 'Parent Relationship: Outer, Inner, SubPlan, InitPlan, Member.';
COMMENT ON COLUMN plan_nodes.scan_direction IS 'Scan Direction of index scans: Forward, Backward.';
COMMENT ON COLUMN plan_nodes.cte_name IS 'CTE Name of CTE Scan nodes.';
COMMENT ON COLUMN plan_nodes.subplan_name IS 'Subplan Name, e.g. "InitPlan 1" (the "(returns $0)" suffix removed).';

CREATE TABLE "plans"(
    fingerprint VARCHAR PRIMARY KEY,
    signature VARCHAR NOT NULL,
    shape JSON NOT NULL,
    plan_json JSON NOT NULL,
    first_seen TIMESTAMP NOT NULL
);
COMMENT ON TABLE plans IS 'One row per distinct plan shape; the full EXPLAIN JSON is kept once, for the first observation.';
COMMENT ON COLUMN plans.fingerprint IS 'Hash of the plan shape: node types, strategies, join types, relations, indexes, child order. Stable across costs, rows and timings.';
COMMENT ON COLUMN plans.signature IS 'One-line readable shape, e.g. "Aggregate > BitmapHeapScan(sbtest1) > BitmapIndexScan(sbtest1_pkey)".';
COMMENT ON COLUMN plans.shape IS 'Canonical JSON of the shape that the fingerprint hashes.';
COMMENT ON COLUMN plans.plan_json IS 'The first full EXPLAIN (FORMAT JSON) output seen with this fingerprint, as PostgreSQL returned it.';
COMMENT ON COLUMN plans.first_seen IS 'collected_at of the first observation with this fingerprint (UTC).';

CREATE TABLE queries(
    query_key VARCHAR PRIMARY KEY,
    "name" VARCHAR NOT NULL,
    "sql" VARCHAR NOT NULL,
    queryid BIGINT
);
COMMENT ON TABLE queries IS 'Queries of the workload (or seen in logs), keyed across runs and versions.';
COMMENT ON COLUMN queries.query_key IS 'Stable key of the query (from the workload name or its normalized text); matches across versions.';
COMMENT ON COLUMN queries.name IS 'Human name of the query, e.g. "range_select".';
COMMENT ON COLUMN queries.sql IS 'SQL text (with literals removed when the store runs in redacted mode).';
COMMENT ON COLUMN queries.queryid IS 'pg_stat_statements queryid when known. Differs between major versions: do not join across versions on it.';

CREATE TABLE query_failures(
    failure_id BIGINT DEFAULT(nextval('query_failure_id_seq')) PRIMARY KEY,
    run_id BIGINT NOT NULL,
    target_id BIGINT NOT NULL,
    query_key VARCHAR NOT NULL,
    point VARCHAR,
    sample_index INTEGER NOT NULL,
    phase VARCHAR NOT NULL,
    params JSON NOT NULL,
    sqlstate VARCHAR,
    message VARCHAR NOT NULL,
    detail VARCHAR,
    hint VARCHAR,
    failed_at TIMESTAMP NOT NULL,
    CHECK((phase IN ('warmup', 'priming', 'measurement', 'generic plan')))
);
COMMENT ON TABLE query_failures IS 'Executions of a workload query that PostgreSQL refused with an ERROR on a target; the run went on without them.';
COMMENT ON COLUMN query_failures.failure_id IS 'Failure id (sequence query_failure_id_seq).';
COMMENT ON COLUMN query_failures.run_id IS 'The run (runs.run_id).';
COMMENT ON COLUMN query_failures.target_id IS 'The target it failed on (targets.target_id).';
COMMENT ON COLUMN query_failures.query_key IS 'The query (queries.query_key).';
COMMENT ON COLUMN query_failures.point IS 'Sweep point label, e.g. "N=8000"; NULL outside sweeps.';
COMMENT ON COLUMN query_failures.sample_index IS 'The sample whose parameters it ran with (observations.sample_index); warm-up executions are negative (-warmup .. -1).';
COMMENT ON COLUMN query_failures.phase IS 'warmup | priming (the unmeasured first execution of a sample) | measurement | generic plan (planning a generic_plan query).';
COMMENT ON COLUMN query_failures.params IS 'JSON of the parameter values it ran with, as in observations.params.';
COMMENT ON COLUMN query_failures.sqlstate IS 'PostgreSQL''s SQLSTATE, e.g. 42703 (undefined_column), 22012 (division_by_zero), 57014 (statement timeout).';
COMMENT ON COLUMN query_failures.message IS 'PostgreSQL''s primary error message (passwords redacted).';
COMMENT ON COLUMN query_failures.detail IS 'The error''s DETAIL, when it has one (passwords redacted).';
COMMENT ON COLUMN query_failures.hint IS 'The error''s HINT, when it has one (passwords redacted).';
COMMENT ON COLUMN query_failures.failed_at IS 'When the execution failed (UTC).';

CREATE TABLE runs(
    run_id BIGINT DEFAULT(nextval('run_id_seq')) PRIMARY KEY,
    "label" VARCHAR NOT NULL,
    started_at TIMESTAMP NOT NULL,
    finished_at TIMESTAMP,
    status VARCHAR DEFAULT('running') NOT NULL,
    tool_version VARCHAR NOT NULL,
    workload_hash VARCHAR,
    host VARCHAR NOT NULL,
    owner_host VARCHAR,
    owner_pid INTEGER,
    owner_started BIGINT,
    status_note VARCHAR,
    kind VARCHAR DEFAULT('run') NOT NULL,
    CHECK((status IN ('running', 'complete', 'failed')))
);
COMMENT ON TABLE runs IS 'One planshift invocation that collected observations (run, ingest).';
COMMENT ON COLUMN runs.run_id IS 'Run id, increasing (sequence run_id_seq).';
COMMENT ON COLUMN runs.label IS 'Free-text label given by the user or the command, e.g. "pg15-vs-pg17".';
COMMENT ON COLUMN runs.started_at IS 'When the run began (UTC).';
COMMENT ON COLUMN runs.finished_at IS 'When the run ended (UTC); NULL while running or if it crashed.';
COMMENT ON COLUMN runs.status IS 'running | complete | failed. Comparisons use complete runs by default.';
COMMENT ON COLUMN runs.tool_version IS 'planshift version that wrote the run.';
COMMENT ON COLUMN runs.workload_hash IS 'Hash of the workload definition (queries and parameters); NULL for log ingests.';
COMMENT ON COLUMN runs.host IS 'Host name of the machine that ran planshift.';
COMMENT ON COLUMN runs.owner_host IS 'Host name of the process that began the run; NULL in stores older than schema 5.';
COMMENT ON COLUMN runs.owner_pid IS 'Process id of the planshift that began the run (on owner_host).';
COMMENT ON COLUMN runs.owner_started IS 'Start time of that process in clock ticks after boot (/proc/PID/stat), to tell a recycled pid; NULL when unknown.';
COMMENT ON COLUMN runs.status_note IS 'Why the status is what it is when planshift set it on its own, e.g. "process 1234 on db1 that ran it is gone (killed?); marked failed".';
COMMENT ON COLUMN runs.kind IS 'run (planshift run or demo) | noise (planshift noise: an A/A run, its label noise:<server>) | ingest (planshift ingest of logs) | snapshot (planshift snapshot of pg_stat_statements).';

CREATE TABLE schema_version(
    "version" INTEGER PRIMARY KEY,
    "name" VARCHAR NOT NULL,
    applied_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE schema_version IS 'Applied migrations of the planshift store; max(version) is the schema version.';
COMMENT ON COLUMN schema_version.version IS 'Migration number (the NNN of detector/store/migrations/NNN_name.sql).';
COMMENT ON COLUMN schema_version.name IS 'Migration file name without the number and .sql, e.g. "initial".';
COMMENT ON COLUMN schema_version.applied_at IS 'When the migration was applied to this file (UTC).';

CREATE TABLE store_identity(
    store_id VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE store_identity IS 'One row: the identity of this store file (kept by copies), which a lake owner token names.';
COMMENT ON COLUMN store_identity.store_id IS 'Random UUID drawn when the store was created (or migrated to schema 9).';
COMMENT ON COLUMN store_identity.created_at IS 'When that happened (UTC).';

CREATE TABLE targets(
    target_id BIGINT DEFAULT(nextval('target_id_seq')) PRIMARY KEY,
    run_id BIGINT NOT NULL,
    "name" VARCHAR NOT NULL,
    "source" VARCHAR NOT NULL,
    server_version_num INTEGER,
    gucs JSON NOT NULL,
    info JSON NOT NULL,
    CHECK(("source" IN ('embedded', 'dsn', 'log')))
);
COMMENT ON TABLE targets IS 'A server and settings variant measured in a run: a DSN, an embedded cluster or a log source.';
COMMENT ON COLUMN targets.target_id IS 'Target id (sequence target_id_seq); unique across runs.';
COMMENT ON COLUMN targets.run_id IS 'The run that measured this target (runs.run_id).';
COMMENT ON COLUMN targets.name IS 'Target name as configured, e.g. "pg15" or "work_mem=64MB"; compared by name across runs.';
COMMENT ON COLUMN targets.source IS 'embedded (local cluster started by planshift) | dsn (existing server) | log (auto_explain log).';
COMMENT ON COLUMN targets.server_version_num IS 'PostgreSQL server_version_num, e.g. 150018; NULL when unknown (logs).';
COMMENT ON COLUMN targets.gucs IS 'JSON object of the settings applied or observed: {"work_mem": "64MB", ...}.';
COMMENT ON COLUMN targets.info IS 'JSON object: initdb options, redacted DSN, io_method, checksums, table row counts. Never a password.';
