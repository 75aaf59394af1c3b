-- mempalace-pg bootstrap, step 2: a least-privilege application role. Run as a superuser, after step 1.
--
-- psql variables (docker/initdb/10-mempalace.sh sets them from the container's environment):
--   app_role      the role MemPalace connects as          (e.g. mempalace)
--   app_password  its password                            (any text; psql quotes it)
--   app_db        the database                            (e.g. mempalace)
--   app_connection_limit  most connections the role may hold at once (e.g. 64: pools, folders, psql)
--
-- The role is no superuser and cannot create databases or roles. It may create schemas in its database
-- (mempalace-pg makes its schema and the AGE graph's on first use, and owns them), use AGE's catalog and
-- register graphs in it, and it gets AGE loaded at connection start (session_preload_libraries), so Cypher
-- works in its psql sessions without LOAD. Idempotent: rerunning it updates the password and grants.
SELECT format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE', :'app_role')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'app_role') \gexec
ALTER ROLE :"app_role" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'app_password';
GRANT CONNECT, CREATE ON DATABASE :"app_db" TO :"app_role";
GRANT USAGE ON SCHEMA ag_catalog TO :"app_role";
GRANT SELECT, INSERT, UPDATE, DELETE ON ag_catalog.ag_graph, ag_catalog.ag_label TO :"app_role";
ALTER ROLE :"app_role" SET session_preload_libraries = 'age';
ALTER ROLE :"app_role" SET search_path = "$user", public, ag_catalog;
-- Limits that protect the server from one role: its connections, and (for its own sessions, psql
-- included; mempalace-pg sets a shorter statement timeout for its own) runaway statements and
-- transactions left open.
SELECT format('ALTER ROLE %I CONNECTION LIMIT %s', :'app_role', (:'app_connection_limit')::int) \gexec
ALTER ROLE :"app_role" SET statement_timeout = '5min';
ALTER ROLE :"app_role" SET idle_in_transaction_session_timeout = '10min';
-- The tag that makes the role a palace role for mempalace-pg (mempalace_pg/db/defects.py, palace_roles):
-- doctor fails, and the bootstrap refuses another such role, while the server has a defect that lets one
-- palace role read another's palace (pgvector < 0.8.2). A comment is readable by every role, so the
-- check works for doctor run as a palace role too.
COMMENT ON ROLE :"app_role" IS 'mempalace-pg palace role: made by mempalace-pg db bootstrap --app-role';
-- AGE before 1.7 lets any role that may use ag_catalog (this one) open any file the server can read with
-- load_labels_from_file() and load_edges_from_file(), and crash the server with one that is not CSV;
-- mempalace-pg never calls them. Revoked from PUBLIC in this database, whatever AGE's version (from 1.7 on
-- they need pg_read_server_files anyway); a superuser may still grant them to a role that needs them.
SELECT format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', p.oid::regprocedure)
FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'ag_catalog'::regnamespace
  AND p.proname IN ('load_labels_from_file', 'load_edges_from_file') \gexec
