-- planshift store, schema version 7: events read from server logs, and each log plan's Settings.
--
-- Messages that are not plans but can explain a plan change: setting changes and reloads,
-- server starts (with the version), autovacuum and autoanalyze, DDL and maintenance statements
-- recorded by log_statement. `planshift timeline` names the nearest one before each flip.

CREATE TABLE log_events (
    file_id BIGINT NOT NULL,
    line BIGINT NOT NULL,
    byte_offset BIGINT NOT NULL,
    logged_at TIMESTAMP,
    pid INTEGER,
    database VARCHAR,
    kind VARCHAR NOT NULL CHECK (kind IN ('setting', 'reload', 'start', 'autovacuum', 'autoanalyze', 'ddl')),
    subject VARCHAR,
    value VARCHAR,
    message VARCHAR NOT NULL,
    PRIMARY KEY (file_id, byte_offset)
);
COMMENT ON TABLE log_events IS 'Server events read from log files by `planshift ingest`: setting changes, reloads, starts, autovacuum/autoanalyze, DDL (log_statement).';
COMMENT ON COLUMN log_events.file_id IS 'The log file (log_files.file_id).';
COMMENT ON COLUMN log_events.line IS 'Line number (1-based) where the message starts.';
COMMENT ON COLUMN log_events.byte_offset IS 'Uncompressed byte offset where the message starts.';
COMMENT ON COLUMN log_events.logged_at IS 'The message''s time (UTC); NULL when the log line has none.';
COMMENT ON COLUMN log_events.pid IS 'Process id of the server process that logged it (the postmaster for settings and starts).';
COMMENT ON COLUMN log_events.database IS 'Database of the session (DDL), when the log says.';
COMMENT ON COLUMN log_events.kind IS 'setting (parameter changed to) | reload (SIGHUP) | start (starting PostgreSQL, ready to accept connections) | autovacuum | autoanalyze | ddl (a statement: CREATE/DROP INDEX, ALTER TABLE, ANALYZE, VACUUM, CLUSTER, REINDEX).';
COMMENT ON COLUMN log_events.subject IS 'setting: its name; start: the version (NULL on the ready line); autovacuum, autoanalyze, ddl: the table (schema.table as logged; the index name for DROP INDEX; NULL: all tables).';
COMMENT ON COLUMN log_events.value IS 'setting: the new value; NULL otherwise.';
COMMENT ON COLUMN log_events.message IS 'The message''s first line after the prefix (at most 300 characters).';

ALTER TABLE log_entries ADD COLUMN settings VARCHAR;
COMMENT ON COLUMN log_entries.settings IS 'The plan''s Settings (auto_explain.log_settings, 15+) as name = ''value'', ...; NULL when not logged or all defaults.';
