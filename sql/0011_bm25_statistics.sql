-- mempalace-pg schema, revision 0011: what lexical search needs to score by BM25.
--
-- Applied by Alembic (migrations/versions/0011_bm25_statistics.py), search_path = our schema, the schema
-- holding pgvector, ag_catalog.
--
-- BM25 (SQLite FTS5's bm25(), MemPalace's own scorer) weighs a word found in a document by the
-- document's length against the collection's average. Until now lexical search scored IDF x ts_rank,
-- which does not (issue 29). Two figures make the length term:
--
-- * a document's length in words, read from its tsvector by lexical_length(): nothing is added to the
--   rows, so no palace is rewritten;
-- * the words of every document together, per collection, wing and room: facet_counts.tokens, kept by
--   the statement triggers that already keep facet_counts.n (each write adds its rows' lengths).

-- ---------------------------------------------------------------------------------------------------
-- The number of words of a document, from its tsvector. PostgreSQL keeps each word's positions in the
-- tsvector but exposes their total only through ts_rank's length normalisation (flag 2 divides the
-- rank by it), so the total is the ratio of a word's rank without and with that flag; any word of the
-- document serves (its first). Positions are kept up to 256 per word and 16,383 in all: past that
-- the count falls short, as the tsvector itself does.
-- One expression, no FROM: PostgreSQL inlines it into the statement that calls it (a SQL function
-- with a subquery is planned anew on every call, see 0010).
CREATE FUNCTION lexical_length(v tsvector) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN coalesce(length(v), 0) = 0 THEN 0
                ELSE round(ts_rank(v, quote_literal((tsvector_to_array(v))[1])::tsquery, 0)
                           / ts_rank(v, quote_literal((tsvector_to_array(v))[1])::tsquery, 2))::integer END
    $$;
COMMENT ON FUNCTION lexical_length(tsvector) IS
    'Words in a document (the positions of its tsvector, up to 256 per word): BM25''s document length.';

-- ---------------------------------------------------------------------------------------------------
-- The collection's words, per wing and room.
ALTER TABLE facet_counts ADD COLUMN tokens bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN facet_counts.tokens IS
    'The words (lexical_length of document_tsv) of the records counted in n, together: BM25''s average document length is tokens / n.';

UPDATE facet_counts AS f SET tokens = s.tokens
FROM (SELECT collection_pk, metadata -> 'wing' AS wing, metadata -> 'room' AS room,
             sum(lexical_length(document_tsv)) AS tokens
      FROM records GROUP BY 1, 2, 3) AS s
WHERE f.collection_pk = s.collection_pk
  AND text_key(f.wing::text) IS NOT DISTINCT FROM text_key(s.wing::text)
  AND text_key(f.room::text) IS NOT DISTINCT FROM text_key(s.room::text);

CREATE OR REPLACE FUNCTION records_count_facets() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO facet_counts AS f (collection_pk, wing, room, n, tokens)
        SELECT collection_pk, metadata -> 'wing', metadata -> 'room', count(*), sum(lexical_length(document_tsv))
        FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (collection_pk, text_key(wing::text), text_key(room::text))
        DO UPDATE SET n = f.n + EXCLUDED.n, tokens = f.tokens + EXCLUDED.tokens;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO facet_counts AS f (collection_pk, wing, room, n, tokens)
        SELECT collection_pk, metadata -> 'wing', metadata -> 'room', -count(*), -sum(lexical_length(document_tsv))
        FROM old_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (collection_pk, text_key(wing::text), text_key(room::text))
        DO UPDATE SET n = f.n + EXCLUDED.n, tokens = f.tokens + EXCLUDED.tokens;
    ELSE
        INSERT INTO facet_counts AS f (collection_pk, wing, room, n, tokens)
        SELECT collection_pk, wing, room, sum(d), sum(words) FROM (
            SELECT collection_pk, metadata -> 'wing' AS wing, metadata -> 'room' AS room, 1 AS d,
                   lexical_length(document_tsv) AS words FROM new_rows
            UNION ALL
            SELECT collection_pk, metadata -> 'wing', metadata -> 'room', -1, -lexical_length(document_tsv)
            FROM old_rows
        ) AS delta GROUP BY 1, 2, 3 HAVING sum(d) <> 0 OR sum(words) <> 0 ORDER BY 1, 2, 3
        ON CONFLICT (collection_pk, text_key(wing::text), text_key(room::text))
        DO UPDATE SET n = f.n + EXCLUDED.n, tokens = f.tokens + EXCLUDED.tokens;
    END IF;
    RETURN NULL;
END
$fn$;
