-- mempalace-pg schema, revision 0017: a page of mempalace_list_drawers reads a narrow table, not the drawers.
--
-- Applied by Alembic (migrations/versions/0017_listing_keys.py), search_path = our schema, the schema
-- holding pgvector, ag_catalog.
--
-- mempalace_list_drawers pages through a wing's (or a room's, or the palace's) drawers in id order.
-- Revision 0009's indexes hand the ids out in that order, but a page at offset n still fetched n drawer
-- rows from the records partition to skip them: an index on text_key(id) or left(wing, 256) cannot answer
-- by itself (PostgreSQL takes an index-only scan only when the index holds the columns themselves, not
-- expressions of them), and a partition written through upsert holds its drawers in the order they were
-- written, so each skipped id is a read of another page of a table of gigabytes.
--
-- listing_keys holds each record's id key and the first 256 characters of its wing and room, as plain
-- columns, in a table a few percent of the partition's size with no vector index: its indexes answer a
-- page by themselves (an index-only scan), and autovacuum keeps its visibility map, which they need,
-- whatever pgvector's version (the HNSW + VACUUM defect of db/defects.py concerns the partitions).
-- A wing or room of 256 characters or more is still found through the records indexes, where the whole
-- value is compared.
--
-- Kept by statement triggers on each records partition, as vector_bits: an insert adds its rows' entries,
-- an update changes an entry whose wing or room changed, a delete removes them.

CREATE TABLE listing_keys (
    collection_pk integer NOT NULL,
    id_key        bytea   NOT NULL,
    wing_head     text COLLATE "C",
    room_head     text COLLATE "C"
);
COMMENT ON TABLE  listing_keys IS 'Each record''s id key with the first characters of its wing and room: the order of mempalace_list_drawers'' pages, read by index-only scans. Kept by triggers; never edit by hand.';
COMMENT ON COLUMN listing_keys.id_key IS 'text_key(records.id): the id''s UTF-8 bytes (a SHA-256 for ids over 1,024 bytes), the listing''s order.';
COMMENT ON COLUMN listing_keys.wing_head IS 'left(records.wing, 256) (byte order: only equality is asked of it).';
COMMENT ON COLUMN listing_keys.room_head IS 'left(records.room, 256).';

CREATE FUNCTION records_note_keys() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO listing_keys (collection_pk, id_key, wing_head, room_head)
        SELECT collection_pk, text_key(id), left(wing, 256), left(room, 256) FROM new_rows;
    ELSIF TG_OP = 'DELETE' THEN
        DELETE FROM listing_keys k USING old_rows o
        WHERE k.collection_pk = o.collection_pk AND k.id_key = text_key(o.id);
    ELSE
        -- an upsert keeps the id: only a changed wing or room touches the entry, so rewriting a drawer
        -- in place leaves the table (and its visibility map) alone; an id changed by hand moves the entry
        DELETE FROM listing_keys k USING old_rows o
        WHERE k.collection_pk = o.collection_pk AND k.id_key = text_key(o.id)
          AND NOT EXISTS (SELECT 1 FROM new_rows n WHERE n.collection_pk = o.collection_pk AND n.id = o.id);
        INSERT INTO listing_keys AS k (collection_pk, id_key, wing_head, room_head)
        SELECT collection_pk, text_key(id), left(wing, 256), left(room, 256) FROM new_rows
        ON CONFLICT (collection_pk, id_key) DO UPDATE
            SET wing_head = EXCLUDED.wing_head, room_head = EXCLUDED.room_head
            WHERE (k.wing_head, k.room_head) IS DISTINCT FROM (EXCLUDED.wing_head, EXCLUDED.room_head);
    END IF;
    RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION records_note_keys() IS 'Statement trigger on each records partition: keeps listing_keys.';

CREATE FUNCTION records_attach_keys(partition regclass) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    EXECUTE format('CREATE TRIGGER note_keys_insert AFTER INSERT ON %s REFERENCING NEW TABLE AS new_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION records_note_keys()', partition);
    EXECUTE format('CREATE TRIGGER note_keys_update AFTER UPDATE ON %s REFERENCING OLD TABLE AS old_rows '
                   'NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records_note_keys()', partition);
    EXECUTE format('CREATE TRIGGER note_keys_delete AFTER DELETE ON %s REFERENCING OLD TABLE AS old_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION records_note_keys()', partition);
END
$fn$;
COMMENT ON FUNCTION records_attach_keys(regclass) IS 'The listing_keys triggers of one records partition.';

CREATE OR REPLACE FUNCTION records_partition_setup(partition regclass) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    PERFORM records_attach_triggers(partition);
    PERFORM records_attach_room_counts(partition);
    PERFORM records_wing_room_statistics(partition);
    PERFORM records_attach_bits(partition);
    PERFORM records_attach_keys(partition);
END
$fn$;
COMMENT ON FUNCTION records_partition_setup(regclass) IS
    'Called by the backend for each new records partition: its count, first-pass and listing triggers and its wing/room statistics.';

-- The partitions made before this revision: their triggers, then their entries (the indexes after, which
-- is faster than growing them row by row).
DO $do$
DECLARE
    part regclass;
BEGIN
    FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'records'::regclass LOOP
        PERFORM records_attach_keys(part);
    END LOOP;
END
$do$;
INSERT INTO listing_keys (collection_pk, id_key, wing_head, room_head)
SELECT collection_pk, text_key(id), left(wing, 256), left(room, 256) FROM records;

ALTER TABLE listing_keys ADD CONSTRAINT listing_keys_key PRIMARY KEY (collection_pk, id_key);
COMMENT ON INDEX listing_keys_key IS 'A collection''s records in id order (the palace''s list), one entry per record.';
CREATE INDEX listing_keys_wing ON listing_keys (collection_pk, wing_head, id_key);
COMMENT ON INDEX listing_keys_wing IS 'A wing''s records in id order.';
CREATE INDEX listing_keys_wing_room ON listing_keys (collection_pk, wing_head, room_head, id_key);
COMMENT ON INDEX listing_keys_wing_room IS 'A wing''s room''s records in id order.';
CREATE INDEX listing_keys_room ON listing_keys (collection_pk, room_head, id_key);
COMMENT ON INDEX listing_keys_room IS 'A room''s records (of every wing) in id order.';

-- Its only reader was the listing; one index fewer to keep on every write of a drawer.
DROP INDEX records_listing_wing;

-- An index-only scan reads the table's page of an entry the visibility map does not mark all-visible,
-- and autovacuum marks them after a fifth of the table has been written (autovacuum_vacuum_insert_
-- scale_factor): for this table, after a fiftieth. A vacuum of it reads only the pages written since
-- the last one (insert-only, it leaves the indexes alone), and it holds no vector index.
ALTER TABLE listing_keys SET (autovacuum_vacuum_insert_scale_factor = 0.02);
-- VACUUM cannot run inside the migration's transaction: the statistics now, the visibility map at
-- autovacuum's next visit (until then a page reads the table's pages too, a few percent of the drawers').
ANALYZE listing_keys;
