-- planshift store, schema version 8: what kind of run a run is, instead of its label's text.
--
-- A/A noise runs, log ingests and pg_stat_statements snapshots were told apart by label prefixes
-- ("noise:", "ingest ", "snapshot "), which a user's --label could imitate. Older rows get the
-- kind their label implied.

-- (NOT NULL set after the column exists: DuckDB 1.5 adds no column with a constraint)
ALTER TABLE runs ADD COLUMN kind VARCHAR DEFAULT 'run';
UPDATE runs SET kind = CASE
    WHEN starts_with(label, 'noise:') THEN 'noise'
    WHEN starts_with(label, 'ingest ') THEN 'ingest'
    WHEN starts_with(label, 'snapshot ') THEN 'snapshot'
    ELSE 'run' END;
ALTER TABLE runs ALTER COLUMN kind SET NOT NULL;
COMMENT ON COLUMN runs.kind IS 'run (planshift run or demo) | noise (planshift noise: an A/A run, its label noise:<server>) | ingest (planshift ingest of logs) | snapshot (planshift snapshot of pg_stat_statements).';
