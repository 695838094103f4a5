-- Replication slots: a slot holds WAL (a logical one also old catalog rows) until it is dropped,
-- and creating one is not transactional: a rolled-back pg_create_physical_replication_slot stays.
SELECT slot_name::text AS key, slot_type || coalesce(' ' || plugin::text, '') ||
       coalesce(' on ' || database::text, '') || CASE WHEN temporary THEN ' (temporary)' ELSE '' END
       AS value
FROM pg_replication_slots
