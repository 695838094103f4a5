-- When the server last read its configuration files (pg_reload_conf(), SIGHUP).
SELECT 'configuration' AS key, pg_conf_load_time()::text AS value
