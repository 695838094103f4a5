-- planshift store, schema version 1.
--
-- Applied by detector/store.py inside one transaction; the store records it in schema_version.
-- Every column carries a COMMENT, so a DBA can read the documentation from the database itself:
--   SELECT table_name, column_name, data_type, comment FROM duckdb_columns()
--   WHERE NOT internal ORDER BY table_name, column_index;
-- Times are TIMESTAMP in UTC. JSON columns hold JSON text (query them with ->, ->> and json_extract).
-- Relationships (not enforced as foreign keys, so rows can be appended in any order):
--   targets.run_id -> runs, observations.(run_id, target_id, query_key, fingerprint)
--   -> runs, targets, queries, plans; plan_nodes.fingerprint -> plans;
--   pgss_snapshots.target_id -> targets; findings.comparison_id -> comparisons.

CREATE SEQUENCE run_id_seq;
CREATE SEQUENCE target_id_seq;
CREATE SEQUENCE observation_id_seq;
CREATE SEQUENCE pgss_snapshot_id_seq;
CREATE SEQUENCE comparison_id_seq;

CREATE TABLE runs (
    run_id BIGINT PRIMARY KEY DEFAULT nextval('run_id_seq'),
    label VARCHAR NOT NULL,
    started_at TIMESTAMP NOT NULL,
    finished_at TIMESTAMP,
    status VARCHAR NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'complete', 'failed')),
    tool_version VARCHAR NOT NULL,
    workload_hash VARCHAR,
    host VARCHAR NOT NULL
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

CREATE TABLE targets (
    target_id BIGINT PRIMARY KEY DEFAULT nextval('target_id_seq'),
    run_id BIGINT NOT NULL,
    name VARCHAR NOT NULL,
    source VARCHAR NOT NULL CHECK (source IN ('embedded', 'dsn', 'log')),
    server_version_num INTEGER,
    gucs JSON NOT NULL,
    info JSON NOT NULL
);
COMMENT ON TABLE targets IS 'A server and settings variant measured in a run: a DSN, an embedded cluster or a log source.';
COMMENT ON COLUMN targets.target_id IS 'Target id (sequence target_id_seq); unique across runs.';
COMMENT ON COLUMN targets.run_id IS 'The run that measured this target (runs.run_id).';
COMMENT ON COLUMN targets.name IS 'Target name as configured, e.g. "pg15" or "work_mem=64MB"; compared by name across runs.';
COMMENT ON COLUMN targets.source IS 'embedded (local cluster started by planshift) | dsn (existing server) | log (auto_explain log).';
COMMENT ON COLUMN targets.server_version_num IS 'PostgreSQL server_version_num, e.g. 150018; NULL when unknown (logs).';
COMMENT ON COLUMN targets.gucs IS 'JSON object of the settings applied or observed: {"work_mem": "64MB", ...}.';
COMMENT ON COLUMN targets.info IS 'JSON object: initdb options, redacted DSN, io_method, checksums, table row counts. Never a password.';

CREATE TABLE queries (
    query_key VARCHAR PRIMARY KEY,
    name VARCHAR NOT NULL,
    sql VARCHAR NOT NULL,
    queryid BIGINT
);
COMMENT ON TABLE queries IS 'Queries of the workload (or seen in logs), keyed across runs and versions.';
COMMENT ON COLUMN queries.query_key IS 'Stable key of the query (from the workload name or its normalized text); matches across versions.';
COMMENT ON COLUMN queries.name IS 'Human name of the query, e.g. "range_select".';
COMMENT ON COLUMN queries.sql IS 'SQL text (with literals removed when the store runs in redacted mode).';
COMMENT ON COLUMN queries.queryid IS 'pg_stat_statements queryid when known. Differs between major versions: do not join across versions on it.';

CREATE TABLE plans (
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

CREATE TABLE plan_nodes (
    fingerprint VARCHAR NOT NULL,
    path VARCHAR NOT NULL,
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
    PRIMARY KEY (fingerprint, path)
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

CREATE TABLE observations (
    observation_id BIGINT PRIMARY KEY DEFAULT nextval('observation_id_seq'),
    run_id BIGINT NOT NULL,
    target_id BIGINT NOT NULL,
    query_key VARCHAR NOT NULL,
    point VARCHAR,
    params JSON NOT NULL,
    sample_index INTEGER NOT NULL,
    fingerprint VARCHAR NOT NULL,
    source VARCHAR NOT NULL CHECK (source IN ('explain', 'log')),
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
    io_read_ms DOUBLE NOT NULL,
    collected_at TIMESTAMP NOT NULL
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
COMMENT ON COLUMN observations.io_read_ms IS 'Time reading shared blocks (track_io_timing; "I/O Read Time" on 15-16, "Shared I/O Read Time" on 17+), ms; 0 when off.';
COMMENT ON COLUMN observations.collected_at IS 'When the execution happened (UTC).';

CREATE TABLE pgss_snapshots (
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
    plans BIGINT,
    total_plan_time DOUBLE,
    rows BIGINT,
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

CREATE TABLE comparisons (
    comparison_id BIGINT PRIMARY KEY DEFAULT nextval('comparison_id_seq'),
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

CREATE TABLE findings (
    comparison_id BIGINT NOT NULL,
    position INTEGER NOT NULL,
    code VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    severity VARCHAR NOT NULL CHECK (severity IN ('info', 'warning', 'error')),
    query_key VARCHAR NOT NULL,
    query_name VARCHAR NOT NULL,
    message VARCHAR NOT NULL,
    evidence JSON NOT NULL,
    PRIMARY KEY (comparison_id, position)
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
