-- Sessions opened since the run began by planshift's role or under its application_name, other
-- than planshift's own (a dblink_connect left open, for instance).
SELECT pid::text AS key,
       'application_name ' || quote_literal(application_name) || ', role ' || coalesce(usename::text, '?')
       || coalesce(', from ' || client_addr::text, '') || ', connected at ' || backend_start::text
       AS value
FROM pg_stat_activity
WHERE backend_type = 'client backend'
  AND backend_start >= %(since)s::timestamptz
  AND (usename = current_user OR application_name = %(application)s)
  AND pid <> ALL (%(ours)s::int[])
