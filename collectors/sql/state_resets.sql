-- Statistics resets of the database planshift is connected to (pg_stat_reset()).
SELECT 'statistics of database ' || datname AS key, coalesce(stats_reset::text, 'never') AS value
FROM pg_stat_database
WHERE datname = current_database()
