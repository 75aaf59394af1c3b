-- mempalace-pg schema, revision 0019: a filter's own rows read from the wing/room index alone.
--
-- Applied by Alembic (migrations/versions/0019_covering_bits.py), search_path = our schema, the schema
-- holding pgvector, ag_catalog.
--
-- The first pass over a wing/room filter's own rows (revision 0016) found them by vector_bits_wing_room
-- (or vector_bits_room, for a room of every wing) and then read each one's sign bits from the table: one
-- table block per few rows, in no order, since a wing's rows are spread over the whole table. On a
-- server whose buffers do not hold the table (after a restart, or a palace bigger than its memory) those
-- reads are most of the pass. The wing/room index now carries what the pass reads, so PostgreSQL answers
-- it by an index-only scan: a filter's entries lie side by side in the index's leaf pages.
--
-- An index entry is bounded (a third of a page), and a wing or room may be any length; so vector_bits
-- now keeps the first 256 characters of each (as the indexes' keys always had them), which the indexes
-- hold whole. A value shorter than that is the value itself; a search for a longer one does not take
-- this pass (mempalace_pg/engine/nearest.py), and the tail's pass, which does, re-checks each row it
-- picks against the whole filter. The room index goes: beside it PostgreSQL chose by a guess between two
-- indexes for a wing-and-room filter (the narrow room index when the table's pages were not yet
-- all-visible, testing the wing on every room's row of every wing). A filter on a room alone, in every
-- wing, walks the segments again (or is scanned exactly when it is small).
-- An index-only scan still reads the table for a page VACUUM has not yet marked all-visible;
-- autovacuum does that after inserts, and a bulk load vacuums the table itself.

DROP INDEX vector_bits_wing_room;
DROP INDEX vector_bits_room;
UPDATE vector_bits SET wing = left(wing, 256), room = left(room, 256)
WHERE length(wing) > 256 OR length(room) > 256;

CREATE OR REPLACE FUNCTION records_note_bits() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM vector_bits v USING old_rows o
        WHERE v.collection_pk = o.collection_pk AND v.vector_seq = o.vector_seq;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO vector_bits (collection_pk, vector_seq, bits, wing, room)
        SELECT collection_pk, vector_seq, binary_quantize(embedding)::bit varying, left(wing, 256), left(room, 256)
        FROM new_rows
        WHERE vector_dims(embedding) <= 4000;
    END IF;
    RETURN NULL;
END
$fn$;

CREATE INDEX vector_bits_wing_room ON vector_bits (collection_pk, wing, room) INCLUDE (vector_seq, bits);
COMMENT ON COLUMN vector_bits.wing IS 'The first 256 characters of records.wing, for the first pass of a search filtered by wing (and room).';
COMMENT ON COLUMN vector_bits.room IS 'The first 256 characters of records.room.';
COMMENT ON INDEX vector_bits_wing_room IS 'A wing''s (and room''s) entries, with what the first pass over a filter''s own rows reads: an index-only scan.';
