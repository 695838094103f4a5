-- Prepared transactions (PREPARE TRANSACTION): they keep their locks and hold back vacuum until
-- COMMIT PREPARED or ROLLBACK PREPARED, whoever made them.
SELECT gid AS key, owner::text || ' in ' || database::text || ' since ' || prepared::text AS value
FROM pg_prepared_xacts
