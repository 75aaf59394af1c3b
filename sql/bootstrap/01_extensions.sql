-- mempalace-pg bootstrap, step 1: the extensions. Run once per database as a superuser.
--
-- Used by docker/initdb/10-mempalace.sh (a fresh container) and by the test suite (tests/integration/test_stack.py),
-- so the homelab stack and the tests cannot drift. mempalace-pg's first migration also creates them when
-- its role may; AGE is not a trusted extension, so an application role that is no superuser needs this.
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS age;
