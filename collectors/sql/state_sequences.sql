-- Sequences: nextval is not rolled back, so an INSERT into a serial column advances them.
-- Only those this role may read; reading one costs ~12 us (it opens the sequence).
SELECT c.oid::regclass::text AS key,
       coalesce(pg_sequence_last_value(c.oid)::text, 'unused') AS value
FROM (SELECT oid FROM pg_class WHERE relkind = 'S' OFFSET 0) c
WHERE has_sequence_privilege(c.oid, 'SELECT')
