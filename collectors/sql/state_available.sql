-- Which checks this role can run on this server, and how many sequences there are to read.
SELECT current_setting('server_version_num')::int AS version,
       to_regclass('pg_stat_statements_info') IS NOT NULL AS pgss_info,
       has_function_privilege('pg_show_all_file_settings()', 'execute') AS file_settings,
       statement_timestamp()::text AS now,
       (SELECT count(*) FROM pg_class WHERE relkind = 'S') AS sequences
