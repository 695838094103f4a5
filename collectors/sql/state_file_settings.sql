-- What the configuration files say now (ALTER SYSTEM writes postgresql.auto.conf at once; the
-- next reload, by anyone, applies it). Readable by superusers only: skipped otherwise.
SELECT coalesce(sourcefile, '') || ':' || coalesce(name, '') AS key,
       coalesce(setting, '') || CASE WHEN error IS NOT NULL THEN ' (' || error || ')' ELSE '' END
       AS value
FROM pg_file_settings
