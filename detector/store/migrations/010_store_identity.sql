-- planshift store, schema version 9: the store's identity, which the lake's owner tokens name.
--
-- Two stores exporting to one lake under the same host name would overwrite each other's
-- files; the lake records which store owns a host name (LAKE/_owners/HOST.json) and refuses
-- another. A copy of the file is the same store.

CREATE TABLE store_identity (
    store_id VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL
);
INSERT INTO store_identity VALUES (uuid()::VARCHAR, (now() AT TIME ZONE 'UTC')::TIMESTAMP);
COMMENT ON TABLE store_identity IS 'One row: the identity of this store file (kept by copies), which a lake owner token names.';
COMMENT ON COLUMN store_identity.store_id IS 'Random UUID drawn when the store was created (or migrated to schema 9).';
COMMENT ON COLUMN store_identity.created_at IS 'When that happened (UTC).';
