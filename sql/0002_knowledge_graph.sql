-- mempalace-pg schema, revision 0002: MemPalace's temporal knowledge graph as an Apache AGE graph.
--
-- Applied by Alembic (migrations/versions/0002_knowledge_graph.py) with search_path set to the target
-- schema, the schema holding pgvector, then ag_catalog. The graph lives in its own schema (AGE makes
-- one schema per graph), named after ours: schema "mempalace" -> graph "mempalace_kg". This file is a
-- template: :"graph" stands for the graph's quoted name and :'graph' for it as a string literal
-- (psql's variable syntax; mempalace-pg renders them, validating the name first).
--
-- The graph, as Cypher sees it:
--
--   (:Entity {palace, entity_id, name, type, attributes, created_at, seq})
--      -[:Fact {palace, triple_id, predicate, valid_from, valid_to, confidence, source_closet,
--               source_file, source_drawer_id, adapter_name, extracted_at, seq}]->
--   (:Entity)
--
-- * palace      palaces.palace_pk: every vertex and edge belongs to one palace; nothing crosses palaces.
-- * entity_id   MemPalace's entity id (lower-cased name, spaces to _, apostrophes dropped).
-- * triple_id   MemPalace's triple id (t_<subject>_<predicate>_<object>_<hash>).
-- * valid_from / valid_to  ISO dates or UTC datetimes, stored verbatim as MemPalace does; a missing
--               valid_to means the fact is open (current). Intervals are half-open [from, to).
-- * attributes  the entity's MemPalace "properties", the JSON text MemPalace stored, verbatim.
-- * seq         a cursor from kg_seq, taken when a row is written (like SQLite's rowid): it orders
--               results the way MemPalace's SQLite graph does and pages dump_rows.
-- * stub        true on a placeholder vertex for an entity a fact names but nobody created (a fact
--               replicated or imported before, or without, its entity). Stubs are not entities: they
--               are left out of entity counts and names, exactly as a missing SQLite row would be.
--
-- Reads and writes go straight to the label tables (AGE's own ordinary tables, "Entity" and "Fact" in
-- the graph's schema) through the expression indexes below: measured far faster than cypher() for
-- these lookups (see benchmarks/RESULTS.md). Cypher reads the same rows: try
--   SELECT * FROM ag_catalog.cypher('mempalace_kg', $$ MATCH (s:Entity)-[f:Fact]->(o:Entity)
--     RETURN s.name, f.predicate, o.name, f.valid_from, f.valid_to $$) AS (s agtype, p agtype, o agtype,
--     vf agtype, vt agtype);
-- (after LOAD 'age' and SET search_path = ag_catalog, "$user", public).

SELECT ag_catalog.create_graph(:'graph')
WHERE NOT EXISTS (SELECT 1 FROM ag_catalog.ag_graph WHERE name = :'graph');
SELECT ag_catalog.create_vlabel(:'graph', 'Entity')
WHERE NOT EXISTS (SELECT 1 FROM ag_catalog.ag_label l JOIN ag_catalog.ag_graph g ON g.graphid = l.graph
                  WHERE g.name = :'graph' AND l.name = 'Entity');
SELECT ag_catalog.create_elabel(:'graph', 'Fact')
WHERE NOT EXISTS (SELECT 1 FROM ag_catalog.ag_label l JOIN ag_catalog.ag_graph g ON g.graphid = l.graph
                  WHERE g.name = :'graph' AND l.name = 'Fact');

CREATE SEQUENCE kg_seq;
COMMENT ON SEQUENCE kg_seq IS 'Write cursor of the knowledge graph (the "seq" property of Entity vertices and Fact edges).';

-- ---------------------------------------------------------------------------------------------------
-- Small helpers. The IMMUTABLE SQL ones are inlined by the planner, so an index on kg_text(...) and a
-- query written with kg_text(...) meet on the same expression.

CREATE FUNCTION kg_text(props ag_catalog.agtype, key text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT ag_catalog.agtype_object_field_text(props, key) $$;
COMMENT ON FUNCTION kg_text(ag_catalog.agtype, text) IS 'A vertex or edge property as text (NULL when absent).';

-- MemPalace compares temporal values as text after expanding a date-only value: a start (valid_from,
-- as_of) to T00:00:00Z, an end (valid_to) to T23:59:59Z. Compare the results with COLLATE "C".
CREATE FUNCTION kg_start_key(v text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN length(v) = 10 AND substr(v, 5, 1) = '-' AND substr(v, 8, 1) = '-'
                      THEN v || 'T00:00:00Z' ELSE v END $$;
CREATE FUNCTION kg_end_key(v text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN length(v) = 10 AND substr(v, 5, 1) = '-' AND substr(v, 8, 1) = '-'
                      THEN v || 'T23:59:59Z' ELSE v END $$;

-- SQLite's LIKE folds case for ASCII letters only; so does this, for name/id candidate matching.
CREATE FUNCTION kg_fold(v text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT translate(v, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') $$;

-- SQLite's CURRENT_TIMESTAMP format (UTC), used for created_at / extracted_at.
CREATE FUNCTION kg_now() RETURNS text
    LANGUAGE sql STABLE
    AS $$ SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') $$;

-- A property map from a jsonb object, null values dropped (Cypher never stores a null property).
CREATE FUNCTION kg_map(obj jsonb) RETURNS ag_catalog.agtype
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT jsonb_strip_nulls(obj)::text::ag_catalog.agtype $$;

-- A property map as jsonb (AGE 1.5 has no agtype -> json cast; its text form is JSON for our maps).
CREATE FUNCTION kg_jsonb(props ag_catalog.agtype) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT ag_catalog.agtype_out(props)::text::jsonb $$;

-- ---------------------------------------------------------------------------------------------------
-- Indexes on AGE's label tables. AGE 1.7+ creates the id / start_id / end_id ones itself; on older
-- AGE we add them (AGE 1.5 has none: every edge walk would scan the label table).

DO $$
DECLARE
    g text := :'graph';
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                   WHERE i.indrelid = format('%I."Entity"', g)::regclass AND a.attname = 'id' AND i.indisunique) THEN
        EXECUTE format('CREATE UNIQUE INDEX entity_vertex_id ON %I."Entity" (id)', g);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                   WHERE i.indrelid = format('%I."Fact"', g)::regclass AND a.attname = 'start_id') THEN
        EXECUTE format('CREATE INDEX fact_start_id ON %I."Fact" (start_id)', g);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                   WHERE i.indrelid = format('%I."Fact"', g)::regclass AND a.attname = 'end_id') THEN
        EXECUTE format('CREATE INDEX fact_end_id ON %I."Fact" (end_id)', g);
    END IF;
END
$$;

-- One vertex per (palace, entity id): also what makes concurrent "create if missing" safe.
CREATE UNIQUE INDEX entity_key ON :"graph"."Entity" (kg_text(properties, 'palace'), kg_text(properties, 'entity_id'));
-- dump_rows('entities') pages and candidate lookups scan in write order.
CREATE INDEX entity_seq ON :"graph"."Entity" (kg_text(properties, 'palace'), (kg_text(properties, 'seq')::bigint));

-- A triple id names one fact of a palace.
CREATE UNIQUE INDEX fact_triple_id ON :"graph"."Fact" (kg_text(properties, 'palace'), kg_text(properties, 'triple_id'));
-- Open facts by (subject, predicate, object): add_triple's duplicate check, invalidate, supersede.
CREATE INDEX fact_open ON :"graph"."Fact" (start_id, kg_text(properties, 'predicate'), end_id)
    WHERE kg_text(properties, 'valid_to') IS NULL;
-- query_relationship and the sorted relationship types of stats().
CREATE INDEX fact_predicate ON :"graph"."Fact" (kg_text(properties, 'palace'), (kg_text(properties, 'predicate') COLLATE "C"));
-- timeline(): byte order of valid_from (missing last), then triple id, like SQLite's BINARY collation.
CREATE INDEX fact_timeline ON :"graph"."Fact" (kg_text(properties, 'palace'), (kg_text(properties, 'valid_from') COLLATE "C"),
                                               (kg_text(properties, 'triple_id') COLLATE "C"));
-- dump_rows('triples') pages in write order.
CREATE INDEX fact_seq ON :"graph"."Fact" (kg_text(properties, 'palace'), (kg_text(properties, 'seq')::bigint));

-- find_entity_candidates / query_entity's fuzzy fallback match a name by whole tokens with LIKE
-- ('x %', '% x', '% x %'; ids by '_'-separated tokens). A name can only match if it holds every
-- token of x, so these token-array indexes find the few candidates and LIKE then decides exactly.
CREATE INDEX entity_name_tokens ON :"graph"."Entity" USING gin (string_to_array(kg_fold(kg_text(properties, 'name')), ' '));
CREATE INDEX entity_id_tokens ON :"graph"."Entity" USING gin (string_to_array(kg_fold(kg_text(properties, 'entity_id')), '_'));

-- The planner's estimate for "is not a stub" (every query filters on it) needs statistics on that
-- expression; without them it guesses 0.5% and picks poor join orders.
CREATE STATISTICS entity_stub_stats ON (kg_text(properties, 'stub')) FROM :"graph"."Entity";
CREATE STATISTICS fact_valid_to_stats ON (kg_text(properties, 'valid_to')) FROM :"graph"."Fact";

-- ---------------------------------------------------------------------------------------------------
-- Writes. Each is one statement for the caller, so one round trip and one transaction (or part of the
-- caller's transaction). Facts on the same (palace, subject, predicate, object) are serialized by a
-- transaction-scoped advisory lock: under READ COMMITTED each statement in these functions takes a
-- fresh snapshot, so the duplicate check after the lock sees a concurrent writer's committed fact.
-- Errors a caller should see as bad input are raised with SQLSTATE 'MPKG1'. The PL/pgSQL functions
-- keep the search_path they were created with (our schema, then ag_catalog for AGE's graphid
-- operators), whatever the caller's.

CREATE FUNCTION kg_lock_fact(p_palace integer, p_subject text, p_predicate text, p_object text) RETURNS void
    LANGUAGE sql
    AS $$ SELECT pg_advisory_xact_lock(hashtextextended(
              concat_ws(chr(31), 'mempalace_pg:kg', p_palace, p_subject, p_predicate, p_object), 0)) $$;

CREATE FUNCTION kg_entity_props(p_palace integer, p_key text, p_name text, p_type text,
                                p_attributes text, p_created_at text) RETURNS ag_catalog.agtype
    LANGUAGE sql
    AS $$ SELECT :"schema".kg_map(jsonb_build_object('palace', p_palace, 'entity_id', p_key, 'name', p_name, 'type', p_type,
                                           'attributes', p_attributes, 'created_at', p_created_at,
                                           'seq', nextval(':"schema".kg_seq'))) $$;

CREATE FUNCTION kg_stub_props(p_palace integer, p_key text) RETURNS ag_catalog.agtype
    LANGUAGE sql
    AS $$ SELECT :"schema".kg_map(jsonb_build_object('palace', p_palace, 'entity_id', p_key, 'stub', true)) $$;

CREATE FUNCTION kg_fact_props(p_palace integer, p_triple_id text, p_predicate text, p_valid_from text,
                              p_valid_to text, p_confidence double precision, p_source_closet text,
                              p_source_file text, p_source_drawer_id text, p_adapter_name text,
                              p_extracted_at text) RETURNS ag_catalog.agtype
    LANGUAGE sql
    AS $$ SELECT :"schema".kg_map(jsonb_build_object(
              'palace', p_palace, 'triple_id', p_triple_id, 'predicate', p_predicate,
              'valid_from', p_valid_from, 'valid_to', p_valid_to, 'confidence', p_confidence,
              'source_closet', p_source_closet, 'source_file', p_source_file,
              'source_drawer_id', p_source_drawer_id, 'adapter_name', p_adapter_name,
              'extracted_at', p_extracted_at, 'seq', nextval(':"schema".kg_seq'))) $$;

-- The vertex of an entity, any kind (entity or stub); NULL when there is none.
CREATE FUNCTION kg_find_vertex(p_palace integer, p_key text) RETURNS ag_catalog.graphid
    LANGUAGE sql STABLE
    AS $$ SELECT id FROM :"graph"."Entity"
          WHERE :"schema".kg_text(properties, 'palace') = p_palace::text AND :"schema".kg_text(properties, 'entity_id') = p_key $$;

-- MemPalace's "INSERT OR IGNORE INTO entities (id, name)": the entity's vertex, created with type
-- 'unknown' if missing (a stub becomes a real entity).
CREATE FUNCTION kg_ensure_entity(p_palace integer, p_key text, p_name text) RETURNS ag_catalog.graphid
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    v ag_catalog.graphid;
    is_stub boolean;
BEGIN
    SELECT id, kg_text(properties, 'stub') IS NOT NULL INTO v, is_stub
    FROM :"graph"."Entity"
    WHERE kg_text(properties, 'palace') = p_palace::text AND kg_text(properties, 'entity_id') = p_key;
    IF v IS NOT NULL THEN
        IF is_stub THEN
            UPDATE :"graph"."Entity" SET properties = kg_entity_props(p_palace, p_key, p_name, 'unknown', '{}', kg_now())
            WHERE id = v;
        END IF;
        RETURN v;
    END IF;
    INSERT INTO :"graph"."Entity" (properties)
    VALUES (kg_entity_props(p_palace, p_key, p_name, 'unknown', '{}', kg_now()))
    ON CONFLICT (kg_text(properties, 'palace'), kg_text(properties, 'entity_id')) DO NOTHING
    RETURNING id INTO v;
    RETURN coalesce(v, kg_find_vertex(p_palace, p_key));  -- NULL only if created concurrently: read it
END
$$;

-- The vertex of an entity, a stub created if there is none (for facts that name unknown entities).
CREATE FUNCTION kg_vertex_or_stub(p_palace integer, p_key text) RETURNS ag_catalog.graphid
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    v ag_catalog.graphid := kg_find_vertex(p_palace, p_key);
BEGIN
    IF v IS NULL THEN
        INSERT INTO :"graph"."Entity" (properties) VALUES (kg_stub_props(p_palace, p_key))
        ON CONFLICT (kg_text(properties, 'palace'), kg_text(properties, 'entity_id')) DO NOTHING
        RETURNING id INTO v;
        v := coalesce(v, kg_find_vertex(p_palace, p_key));
    END IF;
    RETURN v;
END
$$;

-- Set (or, with NULL, remove) one property of a map.
CREATE FUNCTION kg_with(props ag_catalog.agtype, key text, value text) RETURNS ag_catalog.agtype
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT :"schema".kg_map(:"schema".kg_jsonb(props) || jsonb_build_object(key, value)) $$;

-- MemPalace's add_entity: "INSERT OR REPLACE" (name, type, attributes overwritten, created_at reset).
CREATE FUNCTION kg_add_entity(p_palace integer, p_key text, p_name text, p_type text, p_attributes text)
    RETURNS void
    LANGUAGE sql
    AS $$
    INSERT INTO :"graph"."Entity" (properties)
    VALUES (:"schema".kg_entity_props(p_palace, p_key, p_name, p_type, p_attributes, :"schema".kg_now()))
    ON CONFLICT (:"schema".kg_text(properties, 'palace'), :"schema".kg_text(properties, 'entity_id'))
    DO UPDATE SET properties = excluded.properties
$$;

-- Open (s, predicate, o) unless an identical fact is already open: returns the open fact's id.
CREATE FUNCTION kg_open_fact(p_palace integer, s ag_catalog.graphid, p_predicate text, o ag_catalog.graphid,
                             p_triple_id text, p_valid_from text, p_valid_to text, p_confidence double precision,
                             p_source_closet text, p_source_file text, p_source_drawer_id text,
                             p_adapter_name text) RETURNS text
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    existing text;
BEGIN
    SELECT kg_text(properties, 'triple_id') INTO existing
    FROM :"graph"."Fact"
    WHERE start_id = s AND kg_text(properties, 'predicate') = p_predicate AND end_id = o
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

-- MemPalace's add_triple. Returns the new triple id, or the id of the identical open fact.
CREATE FUNCTION kg_add_triple(p_palace integer, p_subject_key text, p_subject_name text, p_predicate text,
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
    PERFORM kg_lock_fact(p_palace, p_subject_key, p_predicate, p_object_key);
    s := kg_ensure_entity(p_palace, p_subject_key, p_subject_name);
    o := kg_ensure_entity(p_palace, p_object_key, p_object_name);
    RETURN kg_open_fact(p_palace, s, p_predicate, o, p_triple_id, p_valid_from, p_valid_to, p_confidence,
                        p_source_closet, p_source_file, p_source_drawer_id, p_adapter_name);
END
$$;

-- Refuse to close a fact before it starts: an inverted interval is invisible to every query.
CREATE FUNCTION kg_check_boundary(p_end text, p_valid_from text, p_label text) RETURNS void
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
BEGIN
    IF p_valid_from IS NOT NULL AND kg_end_key(p_end) COLLATE "C" < kg_start_key(p_valid_from) COLLATE "C" THEN
        RAISE EXCEPTION USING ERRCODE = 'MPKG1',
            MESSAGE = format('%s=%s is before valid_from=%s; an inverted interval would be invisible to every KG query',
                             p_label, quote_literal(p_end), quote_literal(p_valid_from));
    END IF;
END
$$;

-- Close every open (subject, predicate, object) fact at p_at. Returns how many were closed.
CREATE FUNCTION kg_close_open(p_palace integer, s ag_catalog.graphid, p_predicate text, o ag_catalog.graphid,
                              p_at text, p_label text) RETURNS integer
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    vf text;
    n integer;
BEGIN
    IF s IS NULL OR o IS NULL THEN
        RETURN 0;
    END IF;
    FOR vf IN SELECT kg_text(properties, 'valid_from') FROM :"graph"."Fact"
              WHERE start_id = s AND kg_text(properties, 'predicate') = p_predicate AND end_id = o
                AND kg_text(properties, 'valid_to') IS NULL
              ORDER BY kg_text(properties, 'seq')::bigint
    LOOP
        PERFORM kg_check_boundary(p_at, vf, p_label);
    END LOOP;
    UPDATE :"graph"."Fact" SET properties = kg_with(properties, 'valid_to', p_at)
    WHERE start_id = s AND kg_text(properties, 'predicate') = p_predicate AND end_id = o
      AND kg_text(properties, 'valid_to') IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- MemPalace's invalidate: close all open matching facts at p_ended.
CREATE FUNCTION kg_invalidate(p_palace integer, p_subject_key text, p_predicate text, p_object_key text,
                              p_ended text) RETURNS integer
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
BEGIN
    PERFORM kg_lock_fact(p_palace, p_subject_key, p_predicate, p_object_key);
    RETURN kg_close_open(p_palace, kg_find_vertex(p_palace, p_subject_key), p_predicate,
                         kg_find_vertex(p_palace, p_object_key), p_ended, 'valid_to');
END
$$;

-- MemPalace's supersede: close (s, p, old) and open (s, p, new) at one boundary, atomically.
CREATE FUNCTION kg_supersede(p_palace integer, p_subject_key text, p_subject_name text, p_predicate text,
                             p_old_key text, p_new_key text, p_new_name text, p_at text, p_triple_id text,
                             p_confidence double precision, p_source_closet text, p_source_file text,
                             p_source_drawer_id text, p_adapter_name text) RETURNS text
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    s ag_catalog.graphid;
    n ag_catalog.graphid;
BEGIN
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

-- MemPalace's rewrite: close the open fact p_old_triple_id and open its rewording (same subject, new
-- predicate/object, inherited confidence and provenance) at one boundary. NULL if it is not open.
CREATE FUNCTION kg_rewrite(p_palace integer, p_old_triple_id text, p_predicate text, p_object_key text,
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
    SELECT f.id, f.start_id, kg_jsonb(f.properties) INTO old_edge, s, props
    FROM :"graph"."Fact" f
    WHERE kg_text(f.properties, 'palace') = p_palace::text AND kg_text(f.properties, 'triple_id') = p_old_triple_id
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
    WHERE start_id = s AND kg_text(properties, 'predicate') = p_predicate AND end_id = o
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

-- Replication and import (MemPalace's apply_row, `mempalace-pg kg import`): write one row as given,
-- keyed by its id ("INSERT OR REPLACE"). With p_skip_unchanged, a row equal to the stored one is left
-- alone (so an import run twice changes nothing). Returns 'inserted', 'updated' or 'unchanged'.
CREATE FUNCTION kg_apply_entity(p_palace integer, p_key text, p_name text, p_type text, p_attributes text,
                                p_created_at text, p_skip_unchanged boolean DEFAULT false) RETURNS text
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    v ag_catalog.graphid;
    cur jsonb;
BEGIN
    SELECT id, kg_jsonb(properties) INTO v, cur FROM :"graph"."Entity"
    WHERE kg_text(properties, 'palace') = p_palace::text AND kg_text(properties, 'entity_id') = p_key
    FOR UPDATE;
    IF v IS NULL THEN
        INSERT INTO :"graph"."Entity" (properties)
        VALUES (kg_entity_props(p_palace, p_key, p_name, p_type, p_attributes, p_created_at))
        ON CONFLICT (kg_text(properties, 'palace'), kg_text(properties, 'entity_id'))
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

CREATE FUNCTION kg_apply_triple(p_palace integer, p_triple_id text, p_subject_key text, p_predicate text,
                                p_object_key text, p_valid_from text, p_valid_to text,
                                p_confidence double precision, p_source_closet text, p_source_file text,
                                p_source_drawer_id text, p_adapter_name text, p_extracted_at text,
                                p_skip_unchanged boolean DEFAULT false) RETURNS text
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    s ag_catalog.graphid := kg_vertex_or_stub(p_palace, p_subject_key);
    o ag_catalog.graphid := kg_vertex_or_stub(p_palace, p_object_key);
    e ag_catalog.graphid;
    cur_s ag_catalog.graphid;
    cur_o ag_catalog.graphid;
    cur jsonb;
BEGIN
    SELECT id, start_id, end_id, kg_jsonb(properties) INTO e, cur_s, cur_o, cur FROM :"graph"."Fact"
    WHERE kg_text(properties, 'palace') = p_palace::text AND kg_text(properties, 'triple_id') = p_triple_id
    FOR UPDATE;
    IF e IS NULL THEN
        INSERT INTO :"graph"."Fact" (start_id, end_id, properties)
        VALUES (s, o, kg_fact_props(p_palace, p_triple_id, p_predicate, p_valid_from, p_valid_to, p_confidence,
                                    p_source_closet, p_source_file, p_source_drawer_id, p_adapter_name,
                                    p_extracted_at))
        ON CONFLICT (kg_text(properties, 'palace'), kg_text(properties, 'triple_id'))
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

COMMENT ON FUNCTION kg_add_triple(integer, text, text, text, text, text, text, text, text, double precision, text, text, text, text)
    IS 'MemPalace KnowledgeGraph.add_triple in one statement: entities created if missing, an identical open fact returned instead of duplicated.';
COMMENT ON FUNCTION kg_invalidate(integer, text, text, text, text) IS 'MemPalace KnowledgeGraph.invalidate: closes the open (subject, predicate, object) facts.';
COMMENT ON FUNCTION kg_supersede(integer, text, text, text, text, text, text, text, text, double precision, text, text, text, text)
    IS 'MemPalace KnowledgeGraph.supersede: closes (s, p, old) and opens (s, p, new) at one boundary, in one transaction.';
COMMENT ON FUNCTION kg_rewrite(integer, text, text, text, text, text, text, text) IS 'MemPalace KnowledgeGraph.rewrite (used by kg normalize in MemPalace).';
