-- mempalace-pg schema, revision 0010: add_triple without the work it did not need.
--
-- Applied by Alembic (migrations/versions/0010_cheaper_facts.py), search_path = our schema, the schema
-- holding pgvector, ag_catalog. A template like 0002: :"schema" and :"graph" are our schema and the AGE
-- graph, rendered by mempalace-pg after validating the names.
--
-- Where an add_triple spent its time in the server (issue 27, measured call by call in one transaction):
--
-- * Writing an entity cost about four times writing a fact, and nearly all of it was the two GIN token
--   indexes of the fuzzy name search: kg_tokens() was a SQL function holding a subquery, which
--   PostgreSQL cannot inline, so every entity insert planned it anew for each of the two indexes. As
--   PL/pgSQL its plan is made once per session. It returns exactly what it returned before, for every
--   input, so the indexes built with it stay valid and nothing is rebuilt.
-- * An add_triple whose entities exist went through three nested PL/pgSQL calls (each with its own
--   search_path change) to read two vertices and check for an open fact; it now reads them in its own
--   body and calls kg_ensure_entity() only for an entity that is missing or a stub.
--
-- Same signatures, same results, same locking (kg_lock_fact first, so the open-fact check still sees a
-- concurrent writer's committed fact).

CREATE OR REPLACE FUNCTION kg_tokens(v text, sep text) RETURNS text[]
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    RETURN ARRAY(SELECT left(t, 200) FROM unnest(string_to_array(:"schema".kg_fold(v), sep)) AS t);
END
$$;

CREATE OR REPLACE FUNCTION kg_add_triple(p_palace integer, p_subject_key text, p_subject_name text, p_predicate text,
                                         p_object_key text, p_object_name text, p_triple_id text, p_valid_from text,
                                         p_valid_to text, p_confidence double precision, p_source_closet text,
                                         p_source_file text, p_source_drawer_id text, p_adapter_name text)
    RETURNS text
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    palace text := p_palace::text;
    s ag_catalog.graphid;
    o ag_catalog.graphid;
    s_stub boolean;
    o_stub boolean;
    existing text;
BEGIN
    PERFORM kg_lock_fact(p_palace, p_subject_key, p_predicate, p_object_key);
    SELECT id, kg_text(properties, 'stub') IS NOT NULL INTO s, s_stub FROM :"graph"."Entity"
    WHERE kg_text(properties, 'palace') = palace AND kg_key(properties, 'entity_id') = text_key(p_subject_key);
    IF s IS NULL OR s_stub THEN
        s := kg_ensure_entity(p_palace, p_subject_key, p_subject_name);
    END IF;
    SELECT id, kg_text(properties, 'stub') IS NOT NULL INTO o, o_stub FROM :"graph"."Entity"
    WHERE kg_text(properties, 'palace') = palace AND kg_key(properties, 'entity_id') = text_key(p_object_key);
    IF o IS NULL OR o_stub THEN
        o := kg_ensure_entity(p_palace, p_object_key, p_object_name);
    END IF;
    SELECT kg_text(properties, 'triple_id') INTO existing
    FROM :"graph"."Fact"
    WHERE start_id = s AND kg_key(properties, 'predicate') = text_key(p_predicate) AND end_id = o
      AND kg_text(properties, 'valid_to') IS NULL
    ORDER BY kg_text(properties, 'seq')::bigint
    LIMIT 1;
    IF existing IS NOT NULL THEN
        RETURN existing;
    END IF;
    INSERT INTO :"graph"."Fact" (start_id, end_id, properties)
    VALUES (s, o, kg_fact_props(p_palace, p_triple_id, p_predicate, p_valid_from, p_valid_to, p_confidence,
                                p_source_closet, p_source_file, p_source_drawer_id, p_adapter_name, kg_now()));
    RETURN p_triple_id;
END
$$;
