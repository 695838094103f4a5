-- planshift store, schema version 5: the process that owns a run, to find runs left behind.
--
-- A run killed with SIGKILL stays 'running'; a later planshift on the same host sees that
-- owner_pid is gone (or recycled: owner_started differs) and marks the run failed, saying why
-- in status_note.

ALTER TABLE runs ADD COLUMN owner_host VARCHAR;
ALTER TABLE runs ADD COLUMN owner_pid INTEGER;
ALTER TABLE runs ADD COLUMN owner_started BIGINT;
ALTER TABLE runs ADD COLUMN status_note VARCHAR;
COMMENT ON COLUMN runs.owner_host IS 'Host name of the process that began the run; NULL in stores older than schema 5.';
COMMENT ON COLUMN runs.owner_pid IS 'Process id of the planshift that began the run (on owner_host).';
COMMENT ON COLUMN runs.owner_started IS 'Start time of that process in clock ticks after boot (/proc/PID/stat), to tell a recycled pid; NULL when unknown.';
COMMENT ON COLUMN runs.status_note IS 'Why the status is what it is when planshift set it on its own, e.g. "process 1234 on db1 that ran it is gone (killed?); marked failed".';
