-- planshift store, schema version 2: auto_explain log ingest and pg_stat_statements metadata.
--
-- log_files is the ingest ledger: one row per log file (identified by its content, not its
-- name), with the offset up to which its entries are stored. Each batch of observations and
-- the ledger update commit in one transaction, so an ingest killed at any point leaves a
-- consistent store and a rerun resumes where the last batch ended.

CREATE SEQUENCE log_file_id_seq;

CREATE TABLE log_files (
    file_id BIGINT PRIMARY KEY DEFAULT nextval('log_file_id_seq'),
    path VARCHAR NOT NULL,
    format VARCHAR NOT NULL CHECK (format IN ('stderr', 'csvlog', 'jsonlog')),
    compressed BOOLEAN NOT NULL,
    head_len BIGINT NOT NULL,
    head_sha256 VARCHAR NOT NULL,
    resume_offset BIGINT NOT NULL,
    resume_line BIGINT NOT NULL,
    high_offset BIGINT NOT NULL,
    pending_starts JSON NOT NULL,
    entries BIGINT NOT NULL,
    plans BIGINT NOT NULL,
    problems BIGINT NOT NULL,
    first_ingested_at TIMESTAMP NOT NULL,
    last_ingested_at TIMESTAMP NOT NULL
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

CREATE TABLE log_entries (
    observation_id BIGINT PRIMARY KEY,
    file_id BIGINT NOT NULL,
    line BIGINT NOT NULL,
    byte_offset BIGINT NOT NULL,
    pid INTEGER,
    database VARCHAR,
    user_name VARCHAR,
    queryid BIGINT,
    plan_format VARCHAR NOT NULL CHECK (plan_format IN ('json', 'text')),
    analyzed BOOLEAN NOT NULL
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

CREATE TABLE log_problems (
    file_id BIGINT NOT NULL,
    line BIGINT NOT NULL,
    kind VARCHAR NOT NULL,
    message VARCHAR NOT NULL,
    recorded_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE log_problems IS 'Broken input met while ingesting: truncated entries, invalid JSON, unreadable plans, binary garbage. Counted and skipped, never fatal.';
COMMENT ON COLUMN log_problems.file_id IS 'The log file (log_files.file_id).';
COMMENT ON COLUMN log_problems.line IS 'Line number (1-based) where the broken entry starts.';
COMMENT ON COLUMN log_problems.kind IS 'truncated | bad-json | bad-plan | bad-record | garbage | too-large.';
COMMENT ON COLUMN log_problems.message IS 'What was wrong, one line.';
COMMENT ON COLUMN log_problems.recorded_at IS 'When the problem was recorded (UTC).';

CREATE TABLE pgss_info (
    snapshot_id BIGINT PRIMARY KEY,
    dealloc BIGINT,
    stats_reset TIMESTAMP
);
COMMENT ON TABLE pgss_info IS 'pg_stat_statements_info read with each snapshot (PostgreSQL 14+): evictions and the last reset.';
COMMENT ON COLUMN pgss_info.snapshot_id IS 'The snapshot (pgss_snapshots.snapshot_id).';
COMMENT ON COLUMN pgss_info.dealloc IS 'Cumulative count of entries evicted because pg_stat_statements.max was reached.';
COMMENT ON COLUMN pgss_info.stats_reset IS 'When pg_stat_statements_reset() last reset all statistics (UTC).';
