-- planshift store, schema version 6: I/O time is NULL when it was not measured.
--
-- EXPLAIN shows "I/O Read Time" (15-16) / "Shared I/O Read Time" (17+) only when
-- track_io_timing is on; before this version a plan without it was stored as 0 ms, the same as
-- a plan that read nothing. Rows stored earlier keep their 0.

ALTER TABLE observations ALTER COLUMN io_read_ms DROP NOT NULL;
COMMENT ON COLUMN observations.io_read_ms IS 'Time reading shared blocks (track_io_timing; "I/O Read Time" on 15-16, "Shared I/O Read Time" on 17+), ms; NULL when not measured (track_io_timing off; 0 in rows stored before schema 6).';
