-- planshift store, schema version 9: each logged plan's plan-cache mode; duplicate ranges.
--
-- A prepared statement's generic plan and its custom plans can have the same shape (one
-- fingerprint): whether an execution used the generic plan is a fact of the execution, kept
-- per log entry, so a flip of the custom plans is told from a switch to the generic plan.
-- A range of a log that repeats what was already stored (a log appended to itself, a copy
-- inside another file) is not stored again; it is recorded as a `duplicate` problem.

ALTER TABLE log_entries ADD COLUMN generic BOOLEAN;
COMMENT ON COLUMN log_entries.generic IS 'True when the plan is a prepared statement''s generic plan (its conditions reference $1, $2 ... instead of values); NULL for entries ingested before schema version 9.';
COMMENT ON COLUMN log_problems.kind IS 'truncated | bad-json | bad-plan | bad-record | garbage | too-large | encoding | bad-time | no-query | bad-gzip | duplicate (a range already stored: not stored again).';
