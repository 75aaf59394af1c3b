-- mempalace-pg schema, revision 0004: the graph's SQL-language write helpers become PL/pgSQL, planned once.
--
-- Applied by Alembic (migrations/versions/0004_planned_once.py), search_path = our schema, the
-- schema holding pgvector, ag_catalog. A template like 0002: :"schema" and :"graph" are our schema and
-- the AGE graph, rendered by mempalace-pg after validating the names.
--
-- A SQL-language function whose body reads or writes a table cannot be inlined into its caller, and
-- PostgreSQL 17 plans its body again at every call. Three such functions sit on write paths:
-- * kg_find_vertex (an entity's vertex id, stubs included): kg_invalidate calls it twice and kg_supersede
--   once, so each planned one or two queries against the Entity label table on every call;
-- * kg_add_entity (MemPalace's add_entity);
-- * kg_mark_drawers_deleted (the backend's delete of drawers that facts were drawn from).
-- In PL/pgSQL a query's plan is kept for the session. Same signatures, same results, same snapshots
-- (kg_find_vertex stays STABLE: it reads the snapshot of the statement that calls it, as before).
--
-- Planning a lookup once per session made these calls measurably cheaper than planning it on every
-- call; benchmarks/bench_kg.py measures invalidate (benchmarks/RESULTS.md).

CREATE OR REPLACE FUNCTION kg_find_vertex(p_palace integer, p_key text) RETURNS ag_catalog.graphid
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN (SELECT e.id FROM :"graph"."Entity" e
            WHERE :"schema".kg_text(e.properties, 'palace') = p_palace::text
              AND :"schema".kg_text(e.properties, 'entity_id') = p_key);
END
$$;
COMMENT ON FUNCTION kg_find_vertex(integer, text) IS
    'The vertex id of entity p_key of palace p_palace (a stub included); NULL when there is none.';

CREATE OR REPLACE FUNCTION kg_add_entity(p_palace integer, p_key text, p_name text, p_type text, p_attributes text)
    RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO :"graph"."Entity" (properties)
    VALUES (:"schema".kg_entity_props(p_palace, p_key, p_name, p_type, p_attributes, :"schema".kg_now()))
    ON CONFLICT (:"schema".kg_text(properties, 'palace'), :"schema".kg_text(properties, 'entity_id'))
    DO UPDATE SET properties = excluded.properties;
END
$$;

CREATE OR REPLACE FUNCTION kg_mark_drawers_deleted(p_palace integer, p_drawer_ids text[]) RETURNS integer
    LANGUAGE plpgsql
    SET search_path FROM CURRENT
    AS $$
DECLARE
    n integer;
BEGIN
    UPDATE :"graph"."Fact" f SET properties = kg_with(f.properties, 'source_drawer_deleted_at', kg_now())
    WHERE kg_text(f.properties, 'palace') = p_palace::text
      AND kg_text(f.properties, 'source_drawer_id') = ANY (p_drawer_ids);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
