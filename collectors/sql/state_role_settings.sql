-- ALTER ROLE / ALTER DATABASE ... SET: committed through dblink they apply to every new session.
SELECT coalesce((SELECT rolname FROM pg_roles WHERE oid = setrole), 'all roles') || ' in ' ||
       coalesce((SELECT datname FROM pg_database WHERE oid = setdatabase), 'all databases') AS key,
       array_to_string(setconfig, ', ') AS value
FROM pg_db_role_setting
