-- mempalace-pg schema, revision 0013: which vector index segments were built young.
--
-- Applied by Alembic (migrations/versions/0013_young_segments.py), search_path = our schema, the schema
-- holding pgvector, ag_catalog.
--
-- Under sustained writes the folder builds segments that a quiet pass will merge or rebuild anyway:
-- those it builds with a narrower construction search (YOUNG_HNSW_OPTIONS in
-- mempalace_pg/store/indexing.py), which builds faster, so that the folder keeps up
-- with a writer and the rows searched exactly (the tail) stay few. Queries re-rank every candidate by
-- the exact distance either way. Once writes pause, the folder rebuilds each young segment with the
-- full options (alone, or in a merge); this column tells it which ones, and tells whoever reads the
-- table why a segment will be rebuilt.

ALTER TABLE vector_segments ADD COLUMN young boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN vector_segments.young IS
    'Built while writes went on, with a narrower construction search (faster, a coarser graph); the folder rebuilds it with the full options once writes pause.';
