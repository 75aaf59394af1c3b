-- mempalace-pg schema, revision 0015: one lock order for every write to the knowledge graph.
--
-- Applied by Alembic (migrations/versions/0015_lock_order.py), search_path = our schema, the schema
-- holding pgvector, ag_catalog. A template like 0002: :"schema" and :"graph" are our schema and the AGE
-- graph, rendered by mempalace-pg after validating the names.
--
-- Two writers that create the same new entities in opposite orders deadlock: each inserted one into the
-- entities' unique index and waits for the other's. So every write takes the locks of the entities it
-- touches before touching any, in one order (by the lock's key), as transaction-scoped advisory locks:
--
--   1. the palace's graph lock: shared by a write that knows its entities up front (every function
--      below, a filing); exclusive for a transaction that adds facts one by one and so cannot know them
--      (a unit of work, a mined source item, a kg import batch: kg_lock_graph, taken first);
--   2. each entity's lock, in the order of their keys (kg_lock_entities);
--   3. then rows: drawers and their counters (kept in key order by their triggers), entities, facts.
--
-- A lock already held by the same transaction is granted again at once, so a function called inside a
-- transaction that took the palace's graph lock, or its entities' locks, waits for nothing. The fact
-- locks of 0002 (kg_lock_fact) stay: they are taken after the entities' locks and never wait now.
-- The bodies below are those of 0002 and 0005 with the locks added at the top.

CREATE FUNCTION kg_palace_lock(p_palace integer) RETURNS bigint
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT hashtextextended(concat_ws(chr(31), 'mempalace_pg:kg-palace', p_palace), 0) $$;

CREATE FUNCTION kg_lock_entities(p_palace integer, p_keys text[]) RETURNS void
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    k bigint;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(kg_palace_lock(p_palace));
    -- in the order of the lock keys themselves: two entities whose keys collide are one lock, taken once
    FOR k IN SELECT DISTINCT hashtextextended(concat_ws(chr(31), 'mempalace_pg:kg-entity', p_palace, text_key(e)), 0)
             FROM unnest(p_keys) AS e WHERE e IS NOT NULL ORDER BY 1
    LOOP
        PERFORM pg_advisory_xact_lock(k);
    END LOOP;
END
$$;

CREATE FUNCTION kg_lock_graph(p_palace integer) RETURNS void
    LANGUAGE sql SET search_path FROM CURRENT
    AS $$ SELECT pg_advisory_xact_lock(kg_palace_lock(p_palace)) $$;

CREATE OR REPLACE FUNCTION kg_add_triple(p_palace integer, p_subject_key text, p_subject_name text, p_predicate text,
                              p_object_key text, p_object_name text, p_triple_id text, p_valid_from text,
                              p_valid_to text, p_confidence double precision, p_source_closet text,
                              p_source_file text, p_source_drawer_id text, p_adapter_name text)
    RETURNS text
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    s ag_catalog.graphid;
    o ag_catalog.graphid;
BEGIN
    PERFORM kg_lock_entities(p_palace, ARRAY[p_subject_key, p_object_key]);
    PERFORM kg_lock_fact(p_palace, p_subject_key, p_predicate, p_object_key);
    s := kg_ensure_entity(p_palace, p_subject_key, p_subject_name);
    o := kg_ensure_entity(p_palace, p_object_key, p_object_name);
    RETURN kg_open_fact(p_palace, s, p_predicate, o, p_triple_id, p_valid_from, p_valid_to, p_confidence,
                        p_source_closet, p_source_file, p_source_drawer_id, p_adapter_name);
END
$$;

CREATE OR REPLACE FUNCTION kg_invalidate(p_palace integer, p_subject_key text, p_predicate text, p_object_key text,
                              p_ended text) RETURNS integer
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
BEGIN
    PERFORM kg_lock_entities(p_palace, ARRAY[p_subject_key, p_object_key]);
    PERFORM kg_lock_fact(p_palace, p_subject_key, p_predicate, p_object_key);
    RETURN kg_close_open(p_palace, kg_find_vertex(p_palace, p_subject_key), p_predicate,
                         kg_find_vertex(p_palace, p_object_key), p_ended, 'valid_to');
END
$$;

CREATE OR REPLACE FUNCTION kg_supersede(p_palace integer, p_subject_key text, p_subject_name text, p_predicate text,
                             p_old_key text, p_new_key text, p_new_name text, p_at text, p_triple_id text,
                             p_confidence double precision, p_source_closet text, p_source_file text,
                             p_source_drawer_id text, p_adapter_name text) RETURNS text
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    s ag_catalog.graphid;
    n ag_catalog.graphid;
BEGIN
    PERFORM kg_lock_entities(p_palace, ARRAY[p_subject_key, p_old_key, p_new_key]);
    -- both facts' locks, in a fixed order so two supersedes cannot deadlock
    PERFORM kg_lock_fact(p_palace, p_subject_key, p_predicate, k)
    FROM unnest(ARRAY[p_old_key, p_new_key]) AS k ORDER BY k COLLATE "C";
    s := kg_ensure_entity(p_palace, p_subject_key, p_subject_name);
    n := kg_ensure_entity(p_palace, p_new_key, p_new_name);
    PERFORM kg_close_open(p_palace, s, p_predicate, kg_find_vertex(p_palace, p_old_key), p_at, 'at');
    RETURN kg_open_fact(p_palace, s, p_predicate, n, p_triple_id, p_at, NULL, p_confidence,
                        p_source_closet, p_source_file, p_source_drawer_id, p_adapter_name);
END
$$;

CREATE OR REPLACE FUNCTION kg_rewrite(p_palace integer, p_old_triple_id text, p_predicate text, p_object_key text,
                                      p_object_name text, p_at text, p_triple_id text, p_source_file text) RETURNS text
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    old_edge ag_catalog.graphid;
    s ag_catalog.graphid;
    o ag_catalog.graphid;
    props jsonb;
    subject_key text;
    v_confidence double precision;
    v_source_file text;
    existing text;
BEGIN
    -- the entities first (the old fact's subject, read without a lock, and the new object), then the fact
    SELECT kg_text(e.properties, 'entity_id') INTO subject_key
    FROM :"graph"."Fact" f JOIN :"graph"."Entity" e ON e.id = f.start_id
    WHERE kg_text(f.properties, 'palace') = p_palace::text AND kg_key(f.properties, 'triple_id') = text_key(p_old_triple_id)
      AND kg_text(f.properties, 'valid_to') IS NULL;
    IF subject_key IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM kg_lock_entities(p_palace, ARRAY[subject_key, p_object_key]);
    SELECT f.id, f.start_id, kg_jsonb(f.properties) INTO old_edge, s, props
    FROM :"graph"."Fact" f
    WHERE kg_text(f.properties, 'palace') = p_palace::text AND kg_key(f.properties, 'triple_id') = text_key(p_old_triple_id)
      AND kg_text(f.properties, 'valid_to') IS NULL
    FOR UPDATE;
    IF old_edge IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM kg_check_boundary(p_at, props->>'valid_from', 'at');
    SELECT kg_text(properties, 'entity_id') INTO subject_key FROM :"graph"."Entity" WHERE id = s;
    PERFORM kg_lock_fact(p_palace, subject_key, p_predicate, p_object_key);
    o := kg_ensure_entity(p_palace, p_object_key, p_object_name);
    UPDATE :"graph"."Fact" SET properties = kg_with(properties, 'valid_to', p_at) WHERE id = old_edge;
    v_confidence := coalesce((props->>'confidence')::double precision, 1.0);
    v_source_file := coalesce(nullif(props->>'source_file', ''), p_source_file);
    -- Reuse only an already-valid successor carrying the same evidence.
    SELECT kg_text(properties, 'triple_id') INTO existing
    FROM :"graph"."Fact"
    WHERE start_id = s AND kg_key(properties, 'predicate') = text_key(p_predicate) AND end_id = o
      AND kg_text(properties, 'valid_to') IS NULL
      AND (kg_text(properties, 'valid_from') IS NULL
           OR kg_start_key(kg_text(properties, 'valid_from')) COLLATE "C" <= p_at COLLATE "C")
      AND (kg_text(properties, 'confidence'))::double precision IS NOT DISTINCT FROM v_confidence
      AND kg_text(properties, 'source_closet') IS NOT DISTINCT FROM props->>'source_closet'
      AND kg_text(properties, 'source_file') IS NOT DISTINCT FROM v_source_file
      AND kg_text(properties, 'source_drawer_id') IS NOT DISTINCT FROM props->>'source_drawer_id'
      AND kg_text(properties, 'adapter_name') IS NOT DISTINCT FROM props->>'adapter_name'
    ORDER BY kg_text(properties, 'seq')::bigint
    LIMIT 1;
    IF existing IS NOT NULL THEN
        RETURN existing;
    END IF;
    INSERT INTO :"graph"."Fact" (start_id, end_id, properties)
    VALUES (s, o, kg_fact_props(p_palace, p_triple_id, p_predicate, p_at, NULL, v_confidence,
                                props->>'source_closet', v_source_file, props->>'source_drawer_id',
                                props->>'adapter_name', kg_now()));
    RETURN p_triple_id;
END
$$;

CREATE OR REPLACE FUNCTION kg_add_entity(p_palace integer, p_key text, p_name text, p_type text, p_attributes text)
    RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM :"schema".kg_lock_entities(p_palace, ARRAY[p_key]);
    INSERT INTO :"graph"."Entity" (properties)
    VALUES (:"schema".kg_entity_props(p_palace, p_key, p_name, p_type, p_attributes, :"schema".kg_now()))
    ON CONFLICT (:"schema".kg_text(properties, 'palace'), :"schema".kg_key(properties, 'entity_id'))
    DO UPDATE SET properties = excluded.properties;
END
$$;

CREATE OR REPLACE FUNCTION kg_apply_entity(p_palace integer, p_key text, p_name text, p_type text, p_attributes text,
                                           p_created_at text, p_skip_unchanged boolean DEFAULT false) RETURNS text
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    v ag_catalog.graphid;
    cur jsonb;
BEGIN
    PERFORM kg_lock_entities(p_palace, ARRAY[p_key]);
    SELECT id, kg_jsonb(properties) INTO v, cur FROM :"graph"."Entity"
    WHERE kg_text(properties, 'palace') = p_palace::text AND kg_key(properties, 'entity_id') = text_key(p_key)
    FOR UPDATE;
    IF v IS NULL THEN
        INSERT INTO :"graph"."Entity" (properties)
        VALUES (kg_entity_props(p_palace, p_key, p_name, p_type, p_attributes, p_created_at))
        ON CONFLICT (kg_text(properties, 'palace'), kg_key(properties, 'entity_id'))
        DO UPDATE SET properties = excluded.properties;
        RETURN 'inserted';
    END IF;
    IF p_skip_unchanged AND cur->>'stub' IS NULL
       AND cur->>'name' IS NOT DISTINCT FROM p_name AND cur->>'type' IS NOT DISTINCT FROM p_type
       AND cur->>'attributes' IS NOT DISTINCT FROM p_attributes
       AND cur->>'created_at' IS NOT DISTINCT FROM p_created_at THEN
        RETURN 'unchanged';
    END IF;
    UPDATE :"graph"."Entity"
    SET properties = kg_entity_props(p_palace, p_key, p_name, p_type, p_attributes, p_created_at)
    WHERE id = v;
    RETURN 'updated';
END
$$;

CREATE OR REPLACE FUNCTION kg_apply_triple(p_palace integer, p_triple_id text, p_subject_key text, p_predicate text,
                                           p_object_key text, p_valid_from text, p_valid_to text,
                                           p_confidence double precision, p_source_closet text, p_source_file text,
                                           p_source_drawer_id text, p_adapter_name text, p_extracted_at text,
                                           p_skip_unchanged boolean DEFAULT false) RETURNS text
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    s ag_catalog.graphid;
    o ag_catalog.graphid;
    e ag_catalog.graphid;
    cur_s ag_catalog.graphid;
    cur_o ag_catalog.graphid;
    cur jsonb;
BEGIN
    PERFORM kg_lock_entities(p_palace, ARRAY[p_subject_key, p_object_key]);
    s := kg_vertex_or_stub(p_palace, p_subject_key);
    o := kg_vertex_or_stub(p_palace, p_object_key);
    SELECT id, start_id, end_id, kg_jsonb(properties) INTO e, cur_s, cur_o, cur FROM :"graph"."Fact"
    WHERE kg_text(properties, 'palace') = p_palace::text AND kg_key(properties, 'triple_id') = text_key(p_triple_id)
    FOR UPDATE;
    IF e IS NULL THEN
        INSERT INTO :"graph"."Fact" (start_id, end_id, properties)
        VALUES (s, o, kg_fact_props(p_palace, p_triple_id, p_predicate, p_valid_from, p_valid_to, p_confidence,
                                    p_source_closet, p_source_file, p_source_drawer_id, p_adapter_name,
                                    p_extracted_at))
        ON CONFLICT (kg_text(properties, 'palace'), kg_key(properties, 'triple_id'))
        DO UPDATE SET start_id = excluded.start_id, end_id = excluded.end_id, properties = excluded.properties;
        RETURN 'inserted';
    END IF;
    IF p_skip_unchanged AND cur_s = s AND cur_o = o
       AND cur->>'predicate' IS NOT DISTINCT FROM p_predicate
       AND cur->>'valid_from' IS NOT DISTINCT FROM p_valid_from
       AND cur->>'valid_to' IS NOT DISTINCT FROM p_valid_to
       AND (cur->>'confidence')::double precision IS NOT DISTINCT FROM p_confidence
       AND cur->>'source_closet' IS NOT DISTINCT FROM p_source_closet
       AND cur->>'source_file' IS NOT DISTINCT FROM p_source_file
       AND cur->>'source_drawer_id' IS NOT DISTINCT FROM p_source_drawer_id
       AND cur->>'adapter_name' IS NOT DISTINCT FROM p_adapter_name
       AND cur->>'extracted_at' IS NOT DISTINCT FROM p_extracted_at THEN
        RETURN 'unchanged';
    END IF;
    UPDATE :"graph"."Fact"
    SET start_id = s, end_id = o,
        properties = kg_fact_props(p_palace, p_triple_id, p_predicate, p_valid_from, p_valid_to, p_confidence,
                                   p_source_closet, p_source_file, p_source_drawer_id, p_adapter_name,
                                   p_extracted_at)
    WHERE id = e;
    RETURN 'updated';
END
$$;

COMMENT ON FUNCTION kg_lock_entities(integer, text[])
    IS 'Lock order, step 1 and 2: the palace''s graph lock (shared), then the entities'' locks in key order, until the transaction ends.';
COMMENT ON FUNCTION kg_lock_graph(integer)
    IS 'The palace''s whole graph until the transaction ends: for a transaction that writes facts one by one.';
