-- mempalace-pg bootstrap, step 1: the extensions. Run once per database as a superuser.
--
-- Used by docker/initdb/10-mempalace.sh (a fresh container) and by the test suite (tests/integration/test_stack.py),
-- so the homelab stack and the tests cannot drift. mempalace-pg's first migration also creates them when
-- its role may; AGE is not a trusted extension, so an application role that is no superuser needs this.
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS age;
-- Optional, from PostgreSQL's contrib: a vector index segment just built is read into shared buffers before
-- searches switch to it (mempalace_pg/store/warm.py). Not trusted either, so the bootstrap creates it, where
-- the server has it.
SELECT 'CREATE EXTENSION IF NOT EXISTS pg_prewarm'
WHERE EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm') \gexec
