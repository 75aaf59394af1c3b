-- mempalace-pg schema, revision 0016: every row's vector in one bit a dimension, for a filter's own rows.
--
-- Applied by Alembic (migrations/versions/0016_vector_bits.py), search_path = our schema, the schema
-- holding pgvector, ag_catalog.
--
-- Revision 0014 kept the sign bits of the tail's rows (those no index segment holds yet) in vector_tail,
-- and the folder deleted them once the rows were in a segment. A search filtered by wing (and room)
-- walks every segment's HNSW graph, each walk testing the filter on the rows it meets: right after a
-- large write or under sustained writes a palace has a dozen segments or more, and a filter that matches
-- a few percent of the rows makes each walk visit thousands of rows before it has its share.
-- Ranking the filter's own rows by Hamming distance over this narrow table, then re-ranking the best
-- few hundred by the exact distance, costs a fraction of an exact scan of those rows per matching row,
-- whatever the number of segments, and finds what an exact scan finds
-- (mempalace_pg/engine/nearest.py chooses between the two; "A filtered search right after a big
-- write, each way" in benchmarks/RESULTS.md measures both). So the table now keeps every row, under a
-- name that says so, with the indexes that find a wing's or a room's rows.
--
-- Its statement triggers stay as they were: an insert adds its rows' entries, an update replaces them,
-- a delete removes them. The entries above a collection's newest segment are its tail's rows, as
-- before. Vectors wider than pgvector's HNSW limit still get no entry: they are never folded, and
-- searched exactly.

ALTER TABLE vector_tail RENAME TO vector_bits;
ALTER INDEX vector_tail_order RENAME TO vector_bits_order;
-- the first 256 characters of each value, as records_wing_room has them (a B-tree entry is bounded);
-- searches test the whole value too
CREATE INDEX vector_bits_wing_room ON vector_bits (collection_pk, left(wing, 256), left(room, 256));
CREATE INDEX vector_bits_room ON vector_bits (collection_pk, left(room, 256));
COMMENT ON TABLE  vector_bits IS 'Every row''s vector as its binary quantization, with its wing and room: the first pass of a search over the tail (rows above the newest segment) or over a filter''s own rows. Kept by triggers; never edit by hand.';
COMMENT ON COLUMN vector_bits.wing IS 'records.wing, for the first pass of a search filtered by wing (and room).';
COMMENT ON INDEX  vector_bits_wing_room IS 'A wing''s (and room''s) entries: the first pass over a filter''s own rows.';
COMMENT ON INDEX  vector_bits_room IS 'A room''s entries (of every wing).';

CREATE OR REPLACE FUNCTION records_note_tail() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM vector_bits v USING old_rows o
        WHERE v.collection_pk = o.collection_pk AND v.vector_seq = o.vector_seq;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO vector_bits (collection_pk, vector_seq, bits, wing, room)
        SELECT collection_pk, vector_seq, binary_quantize(embedding)::bit varying, wing, room FROM new_rows
        WHERE vector_dims(embedding) <= 4000;
    END IF;
    RETURN NULL;
END
$fn$;
ALTER FUNCTION records_note_tail() RENAME TO records_note_bits;
COMMENT ON FUNCTION records_note_bits() IS 'Statement trigger on each records partition: keeps vector_bits.';

CREATE FUNCTION records_attach_bits(partition regclass) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    EXECUTE format('CREATE TRIGGER note_bits_insert AFTER INSERT ON %s REFERENCING NEW TABLE AS new_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION records_note_bits()', partition);
    EXECUTE format('CREATE TRIGGER note_bits_update AFTER UPDATE ON %s REFERENCING OLD TABLE AS old_rows '
                   'NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records_note_bits()', partition);
    EXECUTE format('CREATE TRIGGER note_bits_delete AFTER DELETE ON %s REFERENCING OLD TABLE AS old_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION records_note_bits()', partition);
END
$fn$;
COMMENT ON FUNCTION records_attach_bits(regclass) IS 'The vector_bits triggers of one records partition.';
DROP FUNCTION records_attach_tail(regclass);

CREATE OR REPLACE FUNCTION records_partition_setup(partition regclass) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    PERFORM records_attach_triggers(partition);
    PERFORM records_attach_room_counts(partition);
    PERFORM records_wing_room_statistics(partition);
    PERFORM records_attach_bits(partition);
END
$fn$;
COMMENT ON FUNCTION records_partition_setup(regclass) IS
    'Called by the backend for each new records partition: its count and first-pass triggers and its wing/room statistics.';

-- The partitions made before this revision: their triggers under the new names (they call the renamed
-- function already), then the rows the folder had taken out (those in segments) get their entries again.
DO $do$
DECLARE
    part regclass;
    op text;
BEGIN
    FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'records'::regclass LOOP
        FOREACH op IN ARRAY ARRAY['insert', 'update', 'delete'] LOOP
            EXECUTE format('ALTER TRIGGER %I ON %s RENAME TO %I', 'note_tail_' || op, part, 'note_bits_' || op);
        END LOOP;
    END LOOP;
END
$do$;

-- The rows the folder had already taken out (those in segments): their entries again.
INSERT INTO vector_bits (collection_pk, vector_seq, bits, wing, room)
SELECT r.collection_pk, r.vector_seq, binary_quantize(r.embedding)::bit varying, r.wing, r.room
FROM records r
WHERE vector_dims(r.embedding) <= 4000
  AND NOT EXISTS (SELECT 1 FROM vector_bits b WHERE b.collection_pk = r.collection_pk AND b.vector_seq = r.vector_seq);
ANALYZE vector_bits;
