-- mempalace-pg schema, revision 0004: the vertex lookup of the graph's write functions, planned once.
--
-- Applied by Alembic (migrations/versions/0004_cached_vertex_lookup.py), search_path = our schema, the
-- schema holding pgvector, ag_catalog. A template like 0002: :"schema" and :"graph" are our schema and
-- the AGE graph, rendered by mempalace-pg after validating the names.
--
-- kg_find_vertex (an entity's vertex id, stubs included) was a SQL-language function. A SQL function
-- whose body reads a table cannot be inlined into its caller, and PostgreSQL 17 plans its body again at
-- every call. kg_invalidate calls it twice and kg_supersede once, so each of them planned one or two
-- queries against the Entity label table and its expression indexes on every call. In PL/pgSQL the
-- query's plan is kept for the session. Same signature, same result, same snapshot (STABLE: it reads
-- the snapshot of the statement that calls it, as before).
--
-- Measured on a 100k-fact graph before writing this (ad-hoc, interleaved blocks of 50 calls): kg_invalidate
-- with its lookups planned once took 0.221 ms p50 against 0.310 ms without waiting for the WAL flush, and
-- 0.459 ms against 0.568 ms with it. benchmarks/bench_kg.py measures the result (RESULTS.md).

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
