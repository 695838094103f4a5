-- pg_stat_statements_reset() of all entries (14+, where the extension is installed).
SELECT 'pg_stat_statements' AS key, coalesce(stats_reset::text, 'never') AS value
FROM pg_stat_statements_info
