-- mempalace-pg schema, revision 0014: the tail's vectors in one bit a dimension, for a cheap first pass.
--
-- Applied by Alembic (migrations/versions/0014_vector_tail.py), search_path = our schema, the schema
-- holding pgvector, ag_catalog.
--
-- A query searches each index segment through its HNSW graph and the tail (rows written since the last
-- segment) exactly. Under sustained writes or right after a large write the tail holds tens of
-- thousands of rows, and reading each one's full row (document, metadata, tsvector, 1.5 kB of vector)
-- costs every query about a microsecond a row. So each written row's vector is also kept here as its
-- binary quantization (pgvector's binary_quantize: one bit a dimension, 48 bytes for 384) with its wing
-- and room, and a query unfiltered or filtered by wing and room (MemPalace's filters) ranks the tail by
-- Hamming distance over this narrow table first, then re-ranks the best few hundred by the exact
-- distance (mempalace_pg/store/search.py, TAIL_CANDIDATES).
--
-- Kept by statement triggers on each records partition: an insert adds its rows' entries, an update
-- (which gives a row a new vector_seq) replaces them, a delete removes them, so the entries above a
-- collection's newest segment are its tail's rows, one each; the folder deletes a collection's entries
-- up to a segment's hi when it registers the segment. Vectors wider than pgvector's HNSW limit are never
-- folded, and are searched exactly: they get no entry.

CREATE TABLE vector_tail (
    collection_pk integer     NOT NULL,
    vector_seq    bigint      NOT NULL,
    bits          bit varying NOT NULL,
    wing          text,
    room          text
);
CREATE INDEX vector_tail_order ON vector_tail (collection_pk, vector_seq);
COMMENT ON TABLE  vector_tail IS 'Rows not yet in a vector index segment, as binary-quantized vectors: the first pass of a search over the tail. Kept by triggers and the folder; never edit by hand.';
COMMENT ON COLUMN vector_tail.bits IS 'binary_quantize(records.embedding): the sign of each dimension.';
COMMENT ON COLUMN vector_tail.wing IS 'records.wing, for the first pass of a search filtered by wing (and room).';

CREATE FUNCTION records_note_tail() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM vector_tail v USING old_rows o
        WHERE v.collection_pk = o.collection_pk AND v.vector_seq = o.vector_seq;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO vector_tail (collection_pk, vector_seq, bits, wing, room)
        SELECT collection_pk, vector_seq, binary_quantize(embedding)::bit varying, wing, room FROM new_rows
        WHERE vector_dims(embedding) <= 4000;
    END IF;
    RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION records_note_tail() IS 'Statement trigger on each records partition: keeps vector_tail.';

CREATE FUNCTION records_attach_tail(partition regclass) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    EXECUTE format('CREATE TRIGGER note_tail_insert AFTER INSERT ON %s REFERENCING NEW TABLE AS new_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION records_note_tail()', partition);
    EXECUTE format('CREATE TRIGGER note_tail_update AFTER UPDATE ON %s REFERENCING OLD TABLE AS old_rows '
                   'NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records_note_tail()', partition);
    EXECUTE format('CREATE TRIGGER note_tail_delete AFTER DELETE ON %s REFERENCING OLD TABLE AS old_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION records_note_tail()', partition);
END
$fn$;
COMMENT ON FUNCTION records_attach_tail(regclass) IS 'The vector_tail triggers of one records partition.';

CREATE OR REPLACE FUNCTION records_partition_setup(partition regclass) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    PERFORM records_attach_triggers(partition);
    PERFORM records_attach_room_counts(partition);
    PERFORM records_wing_room_statistics(partition);
    PERFORM records_attach_tail(partition);
END
$fn$;
COMMENT ON FUNCTION records_partition_setup(regclass) IS
    'Called by the backend for each new records partition: its count and tail triggers and its wing/room statistics.';

-- The partitions made before this revision: their triggers, and the rows of their tails.
DO $do$
DECLARE
    part regclass;
BEGIN
    FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'records'::regclass LOOP
        PERFORM records_attach_tail(part);
        EXECUTE format(
            'INSERT INTO vector_tail (collection_pk, vector_seq, bits, wing, room) '
            'SELECT r.collection_pk, r.vector_seq, binary_quantize(r.embedding)::bit varying, r.wing, r.room '
            'FROM %s r '
            'WHERE vector_dims(r.embedding) <= 4000 AND r.vector_seq > COALESCE((SELECT max(hi) '
            'FROM vector_segments s WHERE s.collection_pk = r.collection_pk), -1)', part);
    END LOOP;
END
$do$;
