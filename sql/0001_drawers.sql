-- mempalace-pg schema, revision 0001: palaces, collections and their records (drawers, closets, assets).
--
-- Applied by Alembic (migrations/versions/0001_drawers.py) with search_path set to the target schema
-- (default "mempalace") followed by the schema holding pgvector, so names here are unqualified.
-- Read it as documentation too: every table and column carries a COMMENT that psql's \d+ shows.

CREATE TABLE palaces (
    palace_pk   integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace   text        NOT NULL DEFAULT '',
    palace_key  text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (namespace, palace_key)
);
COMMENT ON TABLE  palaces IS 'One row per MemPalace palace stored in this database.';
COMMENT ON COLUMN palaces.palace_pk  IS 'Surrogate key used by every other table.';
COMMENT ON COLUMN palaces.namespace  IS 'Tenant namespace (empty for the default); palaces in different namespaces never see each other.';
COMMENT ON COLUMN palaces.palace_key IS 'The palace id MemPalace uses: its palace directory path, unless shared under a chosen key.';

CREATE TABLE collections (
    collection_pk        integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    palace_pk            integer     NOT NULL REFERENCES palaces ON DELETE CASCADE,
    name                 text        NOT NULL,
    dimension            integer     CHECK (dimension BETWEEN 1 AND 16000),
    embedder_model       text,
    embedder_dimension   integer,
    embedder_recorded_at timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (palace_pk, name)
);
COMMENT ON TABLE  collections IS 'One row per collection of a palace (mempalace_drawers, mempalace_closets, mempalace_assets). Its records live in the partition records_c<collection_pk>.';
COMMENT ON COLUMN collections.dimension IS 'Vector width, fixed by the first write; a write of any other width is refused.';
COMMENT ON COLUMN collections.embedder_model IS 'Embedder identity recorded by MemPalace (RFC 001), shared by every machine using this database.';
COMMENT ON COLUMN collections.embedder_dimension IS 'Embedder dimension recorded with embedder_model (0 = not probed).';

-- Records of every collection, one LIST partition per collection (created by the backend when a
-- collection is created). Per-collection partitions keep palaces apart physically, give each
-- collection its own vector index of the right width, and let a bulk load rebuild one collection's
-- index without touching any other palace.
CREATE TABLE records (
    collection_pk integer     NOT NULL,
    id            text        NOT NULL,
    document      text        NOT NULL,
    metadata      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    embedding     vector      NOT NULL,
    wing          text        GENERATED ALWAYS AS (CASE WHEN jsonb_typeof(metadata -> 'wing') = 'string' THEN metadata ->> 'wing' END) STORED,
    room          text        GENERATED ALWAYS AS (CASE WHEN jsonb_typeof(metadata -> 'room') = 'string' THEN metadata ->> 'room' END) STORED,
    source_file   text        GENERATED ALWAYS AS (CASE WHEN jsonb_typeof(metadata -> 'source_file') = 'string' THEN metadata ->> 'source_file' END) STORED,
    filed_at      text        GENERATED ALWAYS AS (CASE WHEN jsonb_typeof(metadata -> 'filed_at') = 'string' THEN metadata ->> 'filed_at' END) STORED,
    document_tsv  tsvector    GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, document)) STORED,
    written_at    timestamptz NOT NULL DEFAULT now(),
    vector_indexed boolean    NOT NULL DEFAULT false,
    PRIMARY KEY (collection_pk, id)
) PARTITION BY LIST (collection_pk);
COMMENT ON TABLE  records IS 'Drawers, closets and assets of every palace: text, metadata and embedding. Partitioned by collection; query through the drawers/closets/assets views for names instead of keys.';
COMMENT ON COLUMN records.id IS 'MemPalace record id (drawer id).';
COMMENT ON COLUMN records.document IS 'The verbatim text.';
COMMENT ON COLUMN records.metadata IS 'MemPalace metadata exactly as written (wing, room, source_file, filed_at, ...).';
COMMENT ON COLUMN records.embedding IS 'The embedding, full precision; cosine distance (<=>) is the metric.';
COMMENT ON COLUMN records.wing IS 'metadata->>''wing'' when it is a string, kept as a column for indexes and readable queries.';
COMMENT ON COLUMN records.room IS 'metadata->>''room''.';
COMMENT ON COLUMN records.source_file IS 'metadata->>''source_file'': the mined file this record came from.';
COMMENT ON COLUMN records.filed_at IS 'metadata->>''filed_at'' (ISO-8601 text, as MemPalace writes it).';
COMMENT ON COLUMN records.document_tsv IS 'Full-text index of document (''simple'' configuration: no stemming, any language, code-friendly).';
COMMENT ON COLUMN records.written_at IS 'When this row was last written to PostgreSQL.';
COMMENT ON COLUMN records.vector_indexed IS 'True once the row is in its collection''s HNSW index. Writes land with false (no index insert on the write path) and are searched exactly until a background merge folds them into the index.';

-- Indexes declared on the parent exist on every partition.
-- (Each partition holds one collection, so these need not lead with collection_pk.)
CREATE INDEX records_wing_room   ON records (wing, room);
CREATE INDEX records_room        ON records (room);
CREATE INDEX records_source_file ON records (source_file);
CREATE INDEX records_filed_at    ON records (filed_at COLLATE "C" DESC NULLS LAST);
-- GIN indexes buffer new entries in a pending list that every search scans; a small limit keeps
-- that cost bounded between vacuums (the backend also merges it after bulk loads).
CREATE INDEX records_document_tsv ON records USING gin (document_tsv) WITH (gin_pending_list_limit = 512);
CREATE INDEX records_metadata    ON records USING gin (metadata jsonb_path_ops) WITH (gin_pending_list_limit = 512);
-- The rows written since the last merge into the vector index (searched exactly; few by design).
CREATE INDEX records_fresh       ON records (collection_pk) WHERE NOT vector_indexed;

-- Record counts per (collection, wing, room), kept by statement-level triggers on each partition
-- (attached by the backend when it creates the partition, see records_attach_triggers below).
-- They make MemPalace's count(), status and taxonomy answers independent of the palace's size.
CREATE TABLE facet_counts (
    collection_pk integer NOT NULL REFERENCES collections ON DELETE CASCADE,
    wing          jsonb,
    room          jsonb,
    n             bigint  NOT NULL,
    CONSTRAINT facet_counts_key UNIQUE NULLS NOT DISTINCT (collection_pk, wing, room)
);
COMMENT ON TABLE  facet_counts IS 'Number of records per collection, wing and room (metadata values as JSON; NULL = field absent). Maintained by triggers; never edit by hand.';
COMMENT ON COLUMN facet_counts.wing IS 'metadata->''wing'' of the counted records (JSON value, NULL when absent).';
COMMENT ON COLUMN facet_counts.room IS 'metadata->''room'' of the counted records (JSON value, NULL when absent).';
COMMENT ON COLUMN facet_counts.n IS 'How many records have this wing and room.';

-- One function serves inserts, updates and deletes: +1 for each new row, -1 for each old one,
-- applied in key order so concurrent writers lock counter rows in the same order.
CREATE FUNCTION records_count_facets() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO facet_counts AS f (collection_pk, wing, room, n)
        SELECT collection_pk, metadata -> 'wing', metadata -> 'room', count(*)
        FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT ON CONSTRAINT facet_counts_key DO UPDATE SET n = f.n + EXCLUDED.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO facet_counts AS f (collection_pk, wing, room, n)
        SELECT collection_pk, metadata -> 'wing', metadata -> 'room', -count(*)
        FROM old_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT ON CONSTRAINT facet_counts_key DO UPDATE SET n = f.n + EXCLUDED.n;
    ELSE
        INSERT INTO facet_counts AS f (collection_pk, wing, room, n)
        SELECT collection_pk, wing, room, sum(d) FROM (
            SELECT collection_pk, metadata -> 'wing' AS wing, metadata -> 'room' AS room, 1 AS d FROM new_rows
            UNION ALL
            SELECT collection_pk, metadata -> 'wing', metadata -> 'room', -1 FROM old_rows
        ) AS delta GROUP BY 1, 2, 3 HAVING sum(d) <> 0 ORDER BY 1, 2, 3
        ON CONFLICT ON CONSTRAINT facet_counts_key DO UPDATE SET n = f.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION records_count_facets() IS 'Statement trigger on each records partition: keeps facet_counts exact.';

-- Give a new partition its triggers (transition tables need statement triggers on the partition itself).
CREATE FUNCTION records_attach_triggers(partition regclass) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    EXECUTE format('CREATE TRIGGER count_facets_insert AFTER INSERT ON %s REFERENCING NEW TABLE AS new_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION records_count_facets()', partition);
    EXECUTE format('CREATE TRIGGER count_facets_update AFTER UPDATE ON %s REFERENCING OLD TABLE AS old_rows '
                   'NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records_count_facets()', partition);
    EXECUTE format('CREATE TRIGGER count_facets_delete AFTER DELETE ON %s REFERENCING OLD TABLE AS old_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION records_count_facets()', partition);
END
$fn$;
COMMENT ON FUNCTION records_attach_triggers(regclass) IS 'Called by the backend for each new records partition.';

-- Readable views: one per MemPalace collection, with the palace instead of surrogate keys.
CREATE VIEW records_named AS
SELECT p.namespace, p.palace_key AS palace, c.name AS collection,
       r.id, r.wing, r.room, r.source_file, r.filed_at, r.document, r.metadata, r.embedding, r.written_at
FROM records r
JOIN collections c USING (collection_pk)
JOIN palaces p USING (palace_pk);
COMMENT ON VIEW records_named IS 'Every record with its palace and collection names.';

CREATE VIEW drawers AS SELECT * FROM records_named WHERE collection NOT IN ('mempalace_closets', 'mempalace_assets');
CREATE VIEW closets AS SELECT * FROM records_named WHERE collection = 'mempalace_closets';
CREATE VIEW assets  AS SELECT * FROM records_named WHERE collection = 'mempalace_assets';
COMMENT ON VIEW drawers IS 'Drawers of every palace (verbatim text chunks), with palace, wing and room.';
COMMENT ON VIEW closets IS 'Closets of every palace (compact pointers to drawers).';
COMMENT ON VIEW assets  IS 'Media assets of every palace.';
