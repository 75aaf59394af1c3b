-- mempalace-pg bootstrap, step 3: each role reaches only its own graphs in AGE's catalog. Run as a
-- superuser, after step 1 (and step 2 for each application role). Needs no psql variables. Idempotent.
--
-- Why: AGE registers a graph by inserting rows into ag_catalog.ag_graph and ag_catalog.ag_label as the
-- role that creates it, so every application role that makes its palace's graph on first use holds
-- INSERT, UPDATE and DELETE on those two tables, on every row, its neighbours' graphs included: bob
-- could unregister alice's labels, and her Cypher would fail. Row-level security limits what a role
-- may change to the rows of graphs whose schema it owns (or is a member of its owner); reading stays
-- open, since AGE and psql read the catalog to resolve a graph by name (a graph's name is all another
-- role sees: its schema's privileges keep its contents, SQL and Cypher alike, to its owner). Superusers
-- and the catalog's owner are not subject to these policies.
ALTER TABLE ag_catalog.ag_graph ENABLE ROW LEVEL SECURITY;
ALTER TABLE ag_catalog.ag_label ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS mempalace_pg_read ON ag_catalog.ag_graph;
DROP POLICY IF EXISTS mempalace_pg_owner ON ag_catalog.ag_graph;
DROP POLICY IF EXISTS mempalace_pg_read ON ag_catalog.ag_label;
DROP POLICY IF EXISTS mempalace_pg_owner ON ag_catalog.ag_label;
CREATE POLICY mempalace_pg_read ON ag_catalog.ag_graph FOR SELECT USING (true);
CREATE POLICY mempalace_pg_owner ON ag_catalog.ag_graph FOR ALL
    USING (pg_catalog.pg_has_role(
        (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.oid = namespace), 'USAGE'))
    WITH CHECK (pg_catalog.pg_has_role(
        (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.oid = namespace), 'USAGE'));
CREATE POLICY mempalace_pg_read ON ag_catalog.ag_label FOR SELECT USING (true);
CREATE POLICY mempalace_pg_owner ON ag_catalog.ag_label FOR ALL
    USING (pg_catalog.pg_has_role(
        (SELECT n.nspowner FROM ag_catalog.ag_graph g JOIN pg_catalog.pg_namespace n ON n.oid = g.namespace
         WHERE g.graphid = graph), 'USAGE'))
    WITH CHECK (pg_catalog.pg_has_role(
        (SELECT n.nspowner FROM ag_catalog.ag_graph g JOIN pg_catalog.pg_namespace n ON n.oid = g.namespace
         WHERE g.graphid = graph), 'USAGE'));
