-- planshift store, schema version 4: findings name the sweep point they were found at.

ALTER TABLE findings ADD COLUMN point VARCHAR;
COMMENT ON COLUMN findings.point IS 'Sweep point of the query comparison, e.g. "N=8000"; NULL outside sweeps.';
