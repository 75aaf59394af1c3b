-- mempalace-pg schema, revision 0018: maintenance that finds a folder building asks it to ANALYZE after.
--
-- Applied by Alembic (migrations/versions/0018_analyze_asked.py), search_path = our schema, the schema
-- holding pgvector, ag_catalog.
--
-- run_maintenance("analyze") refreshes the planner statistics of a collection's records partition. An
-- ANALYZE of the partition waits for the table lock a folder's CREATE INDEX CONCURRENTLY holds, and a
-- full build of a big palace's segment runs for minutes right after a large write: the very moment a
-- caller asks for fresh statistics. Rather than wait, maintenance analyzes what it can at once (the
-- knowledge graph's tables) and leaves the time of its request here; the folder that holds the build
-- analyzes the whole partition as soon as the build ends, and clears the request.

ALTER TABLE vector_folders ADD COLUMN analyze_asked_at timestamptz;
COMMENT ON COLUMN vector_folders.analyze_asked_at IS 'When run_maintenance(''analyze'') found this collection''s folder building and left the ANALYZE of its records to it; NULL once the folder has analyzed them.';
