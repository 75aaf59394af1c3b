-- mempalace-pg schema, revision 0012: the common words of each collection, kept where lexical search
-- reads them in one index lookup.
--
-- Applied by Alembic (migrations/versions/0012_common_words.py), search_path = our schema, the schema
-- holding pgvector, ag_catalog.
--
-- BM25 needs each query word's document frequency. Lexical search counts a word's documents through
-- the GIN index up to a cap (LEXICAL_DF_CAP in mempalace_pg/store/search.py), which for a common word
-- reads that many rows; and past the cap it took the frequency ANALYZE estimated from its sample
-- (pg_stats' most common elements of document_tsv). Two costs follow: counting was half the time of a
-- short query on 100,000 documents, and the estimates (a sample of 30,000 rows; only the thousand most
-- common words, so on a large palace a word past the cap but not listed counted as the cap) reordered
-- BM25's near ties against exact scores (benchmarks/RESULTS.md, bench_lexical).
--
-- So every word found in at least min_docs documents is counted exactly, once, by a scan of the
-- collection's words (ts_stat), and kept here: a word listed far above the cap is not counted by a
-- search, and one past the cap takes its listed share of the collection. The plugin counts after a
-- bulk load, a reindex and the `analyze` maintenance, and its vector index folder recounts when the
-- collection has grown by a share since (so the scans of a growing palace add up to a few times one
-- scan of it). A list that is stale or missing costs speed and a little exactness, never answers:
-- unlisted words are counted, and pg_stats is still read for one that reaches the cap.

CREATE TABLE lexical_common_words (
    collection_pk integer NOT NULL REFERENCES collections ON DELETE CASCADE,
    word          text    NOT NULL,
    docs          bigint  NOT NULL CHECK (docs > 0),
    documents     bigint  NOT NULL CHECK (documents >= docs),
    PRIMARY KEY (collection_pk, word)
);
COMMENT ON TABLE lexical_common_words IS
    'Words found in many of a collection''s documents, counted exactly by remember_common_words(); read by lexical search for BM25''s document frequencies. Never edit by hand.';
COMMENT ON COLUMN lexical_common_words.docs IS 'Documents holding the word when it was counted.';
COMMENT ON COLUMN lexical_common_words.documents IS
    'Documents of the collection when it was counted: a search takes docs / documents of today''s total.';

-- Count the words of one collection found in at least min_docs documents, unless the kept list was
-- counted when the collection was already within min_growth of its size today. Returns the words
-- kept, or NULL when it did not count. Two callers at once both end with a whole list: the second's
-- DELETE waits for the first's rows and its INSERT updates them.
CREATE FUNCTION remember_common_words(pk integer, min_docs integer, min_growth float8 DEFAULT 0)
RETURNS integer
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
DECLARE
    total  bigint;
    counted bigint;
    kept   integer;
BEGIN
    SELECT COALESCE(sum(n), 0) INTO total FROM facet_counts WHERE collection_pk = pk;
    SELECT max(documents) INTO counted FROM lexical_common_words WHERE collection_pk = pk;
    IF counted IS NOT NULL AND total <= counted * (1 + min_growth) AND min_growth > 0 THEN
        RETURN NULL;
    END IF;
    DELETE FROM lexical_common_words WHERE collection_pk = pk;
    -- the partition is records_c<pk> in the schema of records (this function's own)
    INSERT INTO lexical_common_words AS k (collection_pk, word, docs, documents)
    SELECT pk, s.word, s.ndoc, GREATEST(total, s.ndoc)
    FROM ts_stat(format('SELECT document_tsv FROM %I.%I',
                        (SELECT n.nspname FROM pg_catalog.pg_namespace AS n
                         JOIN pg_catalog.pg_class AS c ON c.relnamespace = n.oid
                         WHERE c.oid = 'records'::regclass),
                        'records_c' || pk)) AS s
    WHERE s.ndoc >= min_docs
    ON CONFLICT (collection_pk, word) DO UPDATE SET docs = EXCLUDED.docs, documents = EXCLUDED.documents;
    GET DIAGNOSTICS kept = ROW_COUNT;
    RETURN kept;
END
$fn$;
COMMENT ON FUNCTION remember_common_words(integer, integer, float8) IS
    'Count exactly the words of a collection found in at least min_docs documents (one scan) into lexical_common_words; skipped while the collection has grown by less than min_growth since the last count.';

-- Count them now for the collections there are (one scan of each; the cap of mempalace_pg 0.12).
SELECT remember_common_words(collection_pk, 500) FROM collections;
