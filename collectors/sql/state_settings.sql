-- Settings as the server applies them (not this session's SET): a reload after ALTER SYSTEM
-- (through dblink, outside the rolled-back transaction) changes value, source or sourcefile;
-- pending_restart marks a changed setting that needs a restart.
SELECT name AS key,
       setting || coalesce(' ' || unit, '') || ' (' || source ||
       coalesce(' ' || sourcefile, '') || CASE WHEN pending_restart THEN ', pending restart' ELSE '' END
       || ')' AS value
FROM pg_settings
WHERE source NOT IN ('session', 'client')
