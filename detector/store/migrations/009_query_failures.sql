-- planshift store, schema version 9: executions of a workload query that failed on a target.
--
-- A query that fails on one target (a column renamed in PostgreSQL 17, a function removed, a
-- division by zero for some parameter values) no longer ends the run: each failed execution is
-- a row here, with PostgreSQL's error, and the run goes on. `planshift compare` reports them
-- (rule PS700). A failure that is the server's fault ends the run instead (runs.status_note).

CREATE SEQUENCE query_failure_id_seq;
CREATE TABLE query_failures (
    failure_id BIGINT PRIMARY KEY DEFAULT nextval('query_failure_id_seq'),
    run_id BIGINT NOT NULL,
    target_id BIGINT NOT NULL,
    query_key VARCHAR NOT NULL,
    point VARCHAR,
    sample_index INTEGER NOT NULL,
    phase VARCHAR NOT NULL CHECK (phase IN ('warmup', 'priming', 'measurement', 'generic plan')),
    params JSON NOT NULL,
    sqlstate VARCHAR,
    message VARCHAR NOT NULL,
    detail VARCHAR,
    hint VARCHAR,
    failed_at TIMESTAMP NOT NULL
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
