-- planshift store, schema version 3: one full EXPLAIN per target, query, sweep point and shape.
--
-- `plans` keeps the first EXPLAIN seen for a shape, whichever query produced it; a shape shared
-- by several queries, sweep points or targets (the same Aggregate > IndexScan at N=10 and at
-- N=32000) needs its own example for per-node actual rows, sorts, batches and buffers.

CREATE TABLE plan_examples (
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
