-- mempalace-pg schema, revision 0003: the knowledge graph joined with the drawers.
--
-- Applied by Alembic (migrations/versions/0003_graph_and_drawers.py), search_path = our schema, the
-- schema holding pgvector, ag_catalog. A template like 0002: :"schema" and :"graph" are our schema and
-- the AGE graph, rendered by mempalace-pg after validating the names.
--
-- What it adds:
-- * an index on the drawer each fact was drawn from (Fact.source_drawer_id), both ways of the link;
-- * kg_valid_at() and kg_neighbourhood(): "valid at as_of" and "entities within N hops" in SQL, used by
--   mempalace_pg.retrieval and by anyone in psql;
-- * kg_mark_drawers_deleted(): the rule for facts whose drawer is deleted (see below);
-- * views for people reading their memory in psql: kg_entities, kg_facts, kg_fact_evidence (0001 has drawers).

-- ---------------------------------------------------------------------------------------------------
-- Facts by source drawer: "which facts came from this drawer", and the delete rule below. Not a partial
-- index: the planner takes its expression statistics (how many facts per drawer) only from a
-- non-partial index, and without them it estimates hundreds of facts per drawer and scans the table.
CREATE INDEX fact_source_drawer ON :"graph"."Fact"
    (kg_text(properties, 'palace'), kg_text(properties, 'source_drawer_id'));

-- Facts by edge id (AGE indexes neither label table's id): the retrievals find a fact's properties again
-- after walking the graph on narrow rows.
CREATE INDEX IF NOT EXISTS fact_edge_id ON :"graph"."Fact" (id);  -- survives a DROP SCHEMA of ours; see 0002

-- A fact is valid at as_of when as_of falls in [valid_from, valid_to), date-only values expanded as
-- MemPalace expands them (kg_start_key / kg_end_key); a NULL as_of means "any time" (every fact), as
-- MemPalace's query_entity does without as_of. as_of must already be a start key (T00:00:00Z form for
-- a date). Inlined by the planner.
CREATE FUNCTION kg_valid_at(props ag_catalog.agtype, as_of text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT as_of IS NULL OR (
        (:"schema".kg_text(props, 'valid_from') IS NULL
         OR :"schema".kg_start_key(:"schema".kg_text(props, 'valid_from')) COLLATE "C" <= as_of COLLATE "C")
        AND (:"schema".kg_text(props, 'valid_to') IS NULL
         OR :"schema".kg_end_key(:"schema".kg_text(props, 'valid_to')) COLLATE "C" > as_of COLLATE "C")) $$;
COMMENT ON FUNCTION kg_valid_at(ag_catalog.agtype, text) IS
    'True when the fact (Fact edge properties) is valid at as_of (a start key, e.g. 2026-01-15T00:00:00Z); NULL as_of: always.';

-- The entities within p_hops hops of one entity, following facts valid at p_as_of in either direction,
-- each with its distance (0 for the entity itself). Breadth first, one set-based query per hop over the
-- start_id/end_id indexes, never revisiting a vertex: a hop costs what its frontier touches, not a walk
-- of every path (AGE's variable-length MATCH enumerates paths, which grows with the number of paths).
-- Returns no rows for an unknown entity. STABLE: it reads the calling statement's snapshot.
CREATE FUNCTION kg_neighbourhood(p_palace integer, p_entity_id text, p_hops integer, p_as_of text DEFAULT NULL)
    RETURNS TABLE (vertex ag_catalog.graphid, depth integer)
    LANGUAGE plpgsql STABLE
    SET search_path FROM CURRENT
AS $$
DECLARE
    frontier ag_catalog.graphid[];
    seen ag_catalog.graphid[];
    level integer := 0;
BEGIN
    SELECT array_agg(e.id) INTO frontier FROM :"graph"."Entity" e
    WHERE kg_text(e.properties, 'palace') = p_palace::text AND kg_text(e.properties, 'entity_id') = p_entity_id;
    IF frontier IS NULL THEN
        RETURN;
    END IF;
    seen := frontier;
    RETURN QUERY SELECT v, 0 FROM unnest(frontier) AS v;
    WHILE level < p_hops LOOP
        level := level + 1;
        SELECT array_agg(n) INTO frontier FROM (
            SELECT f.end_id AS n FROM :"graph"."Fact" f
            WHERE f.start_id = ANY (frontier) AND kg_valid_at(f.properties, p_as_of)
            UNION
            SELECT f.start_id FROM :"graph"."Fact" f
            WHERE f.end_id = ANY (frontier) AND kg_valid_at(f.properties, p_as_of)
            EXCEPT
            SELECT unnest(seen)) AS reached;
        EXIT WHEN frontier IS NULL;
        seen := seen || frontier;
        RETURN QUERY SELECT v, level FROM unnest(frontier) AS v;
    END LOOP;
END
$$;
COMMENT ON FUNCTION kg_neighbourhood(integer, text, integer, text) IS
    'Entities (vertex ids) within p_hops hops of entity p_entity_id of palace p_palace, over facts valid at p_as_of, with their hop distance.';

-- ---------------------------------------------------------------------------------------------------
-- The delete rule. A fact may name the drawer it was drawn from (source_drawer_id). Deleting that
-- drawer through the backend keeps the fact (knowledge outlives the note it came from, and MemPalace
-- re-files drawers when a source changes) but stamps it: source_drawer_deleted_at = when. The link is
-- kept, so a drawer filed again under the same id (a re-mined file) is found again; kg_fact_evidence
-- tells the cases apart ('present', 'refiled', 'deleted', 'missing'). Called by the backend's delete
-- in the same statement as the DELETE, so the stamp and the delete commit together.
CREATE FUNCTION kg_mark_drawers_deleted(p_palace integer, p_drawer_ids text[]) RETURNS integer
    LANGUAGE sql
    SET search_path FROM CURRENT
    AS $$
    WITH stamped AS (
        UPDATE :"graph"."Fact" f SET properties = kg_with(f.properties, 'source_drawer_deleted_at', kg_now())
        WHERE kg_text(f.properties, 'palace') = p_palace::text
          AND kg_text(f.properties, 'source_drawer_id') = ANY (p_drawer_ids)
        RETURNING 1)
    SELECT count(*)::integer FROM stamped
$$;
COMMENT ON FUNCTION kg_mark_drawers_deleted(integer, text[]) IS
    'Stamp source_drawer_deleted_at on the facts drawn from these drawers of a palace (called when they are deleted); returns how many facts.';

-- ---------------------------------------------------------------------------------------------------
-- Views for psql. Names instead of ids; one row per drawer / entity / fact; palace named by namespace
-- palace (its key; see the palaces table). docs/sql-cookbook.md shows them at work.

CREATE VIEW kg_entities AS
SELECT p.namespace, p.palace_key AS palace, kg_text(e.properties, 'entity_id') AS entity_id,
       kg_text(e.properties, 'name') AS name, kg_text(e.properties, 'type') AS type,
       kg_text(e.properties, 'attributes') AS attributes, kg_text(e.properties, 'created_at') AS created_at,
       e.id AS vertex, p.palace_pk
FROM :"graph"."Entity" e
JOIN palaces p ON p.palace_pk::text = kg_text(e.properties, 'palace')
WHERE kg_text(e.properties, 'stub') IS NULL;
COMMENT ON VIEW kg_entities IS 'Every palace''s knowledge-graph entities (AGE Entity vertices), as MemPalace''s entities table shows them.';

CREATE VIEW kg_facts AS
SELECT p.namespace, p.palace_key AS palace,
       coalesce(kg_text(s.properties, 'name'), kg_text(s.properties, 'entity_id')) AS subject,
       kg_text(f.properties, 'predicate') AS predicate,
       coalesce(kg_text(o.properties, 'name'), kg_text(o.properties, 'entity_id')) AS object,
       kg_text(f.properties, 'valid_from') AS valid_from, kg_text(f.properties, 'valid_to') AS valid_to,
       kg_text(f.properties, 'valid_to') IS NULL AS current,
       kg_text(f.properties, 'confidence')::double precision AS confidence,
       kg_text(f.properties, 'source_drawer_id') AS source_drawer_id,
       kg_text(f.properties, 'source_drawer_deleted_at') AS source_drawer_deleted_at,
       kg_text(f.properties, 'source_file') AS source_file, kg_text(f.properties, 'source_closet') AS source_closet,
       kg_text(f.properties, 'adapter_name') AS adapter_name, kg_text(f.properties, 'extracted_at') AS extracted_at,
       kg_text(f.properties, 'triple_id') AS triple_id,
       kg_text(s.properties, 'entity_id') AS subject_id, kg_text(o.properties, 'entity_id') AS object_id,
       f.id AS edge, f.start_id AS subject_vertex, f.end_id AS object_vertex, f.properties AS fact_properties,
       p.palace_pk
FROM :"graph"."Fact" f
JOIN :"graph"."Entity" s ON s.id = f.start_id
JOIN :"graph"."Entity" o ON o.id = f.end_id
JOIN palaces p ON p.palace_pk::text = kg_text(f.properties, 'palace');
COMMENT ON VIEW kg_facts IS 'Every palace''s facts (AGE Fact edges) flattened: subject, predicate, object by name, validity, confidence, provenance. Filter on valid_at with kg_valid_at(fact_properties, ...).';

CREATE VIEW kg_fact_evidence AS
SELECT f.namespace, f.palace, f.subject, f.predicate, f.object, f.valid_from, f.valid_to, f.current,
       f.confidence, f.source_drawer_id,
       CASE WHEN f.source_drawer_id IS NULL THEN NULL
            WHEN d.id IS NOT NULL AND f.source_drawer_deleted_at IS NULL THEN 'present'
            WHEN d.id IS NOT NULL THEN 'refiled'
            WHEN f.source_drawer_deleted_at IS NOT NULL THEN 'deleted'
            ELSE 'missing' END AS evidence,
       d.wing, d.room, d.source_file AS drawer_source_file, d.document, f.triple_id, f.palace_pk
FROM kg_facts f
LEFT JOIN LATERAL (
    SELECT r.id, r.wing, r.room, r.source_file, r.document
    FROM records r JOIN collections c ON c.collection_pk = r.collection_pk
    WHERE c.palace_pk = f.palace_pk AND c.name = 'mempalace_drawers' AND r.id = f.source_drawer_id) d ON true;
COMMENT ON VIEW kg_fact_evidence IS 'Each fact with the drawer it was drawn from: evidence = present, refiled (deleted, then filed again under the same id), deleted, missing (never stored here), or NULL (no source drawer).';
