-- mempalace-pg schema, revision 0007: the vector index as segments built over rows already written.
--
-- Applied by Alembic (migrations/versions/0007_vector_segments.py), search_path = our schema, the schema
-- holding pgvector, ag_catalog.
--
-- Until now each collection had one partial HNSW index (WHERE vector_indexed); writes landed outside it
-- and a thread of the writing process inserted them into the graph a hundred at a time. MemPalace writes
-- from CLI processes that exit when done, and a graph insert into a grown graph costs milliseconds a row,
-- so rows written by `mempalace mine` stayed outside the index and every search scanned them exactly.
--
-- Now every write takes the next vector_seq, and a collection's index is a set of segments: partial HNSW
-- indexes over the rows whose vector_seq lies in (lo, hi], listed in vector_segments. Rows above every
-- segment (the tail) are searched exactly. A folder process (mempalace_pg/indexing.py) builds segments
-- over the tail and merges them, concurrently with readers and writers.

CREATE SEQUENCE records_vector_seq;
COMMENT ON SEQUENCE records_vector_seq IS 'Write order of vectors (records.vector_seq).';
-- The rows stored before this revision are 0: one segment over (-1, 0] is built for them below.
ALTER TABLE records ADD COLUMN vector_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE records ALTER COLUMN vector_seq SET DEFAULT nextval('records_vector_seq');
COMMENT ON COLUMN records.vector_seq IS
    'Write order: taken anew by every insert, upsert and update, so a rewritten row leaves the segment that held it. Rows above the newest segment''s hi are not in any vector index yet (see vector_segments).';
CREATE INDEX records_write_order ON records (vector_seq);
COMMENT ON INDEX records_write_order IS 'Finds the tail (rows not in a vector index segment yet) and the newest write.';

-- The old partial HNSW indexes name vector_indexed in their predicate: dropping the column drops them.
DROP INDEX records_fresh;
ALTER TABLE records DROP COLUMN vector_indexed;

CREATE TABLE vector_segments (
    index_name    text PRIMARY KEY,
    collection_pk integer     NOT NULL REFERENCES collections ON DELETE CASCADE,
    lo            bigint      NOT NULL,
    hi            bigint      NOT NULL,
    rows          bigint      NOT NULL,
    built_at      timestamptz NOT NULL DEFAULT now(),
    build_seconds real,
    CHECK (lo < hi)
);
CREATE INDEX vector_segments_collection ON vector_segments (collection_pk, lo);
COMMENT ON TABLE  vector_segments IS 'The HNSW index segments of each collection: index_name covers the rows of records_c<collection_pk> whose vector_seq lies in (lo, hi]. Written by the folder; never edit by hand.';
COMMENT ON COLUMN vector_segments.rows IS 'Rows the segment covered when it was built (rows rewritten since have left it).';
COMMENT ON COLUMN vector_segments.build_seconds IS 'How long its CREATE INDEX took.';

CREATE TABLE vector_folders (
    collection_pk integer PRIMARY KEY REFERENCES collections ON DELETE CASCADE,
    pid           integer,
    host          text,
    activity      text,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    last_error    text
);
COMMENT ON TABLE  vector_folders IS 'What the folder process of each collection did last (mempalace-pg doctor shows it).';
COMMENT ON COLUMN vector_folders.activity IS 'started, folding N rows, absorbing N rows, merging N segments, idle, exited or failed.';
COMMENT ON COLUMN vector_folders.last_error IS 'The last error a folder met, if any (the rows stay searchable exactly).';

-- One segment over the rows already stored, per collection whose width pgvector's HNSW can index.
DO $$
DECLARE
    c record;
    name text;
BEGIN
    PERFORM set_config('maintenance_work_mem', '1GB', true);
    FOR c IN SELECT collection_pk, dimension FROM collections
             WHERE dimension BETWEEN 1 AND 4000 AND to_regclass(format('records_c%s', collection_pk)) IS NOT NULL
    LOOP
        name := format('records_c%s_vec_0_upgrade', c.collection_pk);
        EXECUTE format('CREATE INDEX %I ON %I USING hnsw ((embedding::halfvec(%s)) halfvec_cosine_ops) '
                       'WITH (m = 16, ef_construction = 64) WHERE vector_seq > -1 AND vector_seq <= 0',
                       name, format('records_c%s', c.collection_pk), c.dimension);
        EXECUTE format('INSERT INTO vector_segments (index_name, collection_pk, lo, hi, rows) '
                       'SELECT %L, %s, -1, 0, count(*) FROM %I', name, c.collection_pk,
                       format('records_c%s', c.collection_pk));
    END LOOP;
END
$$;

-- The planner matches each query arm to its segment by the vector_seq range it estimates: give it the
-- new column's statistics now rather than at autovacuum's next visit.
ANALYZE records;
