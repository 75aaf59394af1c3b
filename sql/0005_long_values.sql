-- mempalace-pg schema, revision 0005: values of any length are stored and found again.
--
-- Applied by Alembic (migrations/versions/0005_long_values.py), search_path = our schema, the schema
-- holding pgvector, ag_catalog. A template like 0002: :"schema" and :"graph" are our schema and the AGE
-- graph, rendered by mempalace-pg after validating the names.
--
-- A B-tree entry holds at most about 2.7 kB, so until now an id, a wing, room or source_file (a path of
-- 3 kB is legal on Linux), an entity name or a predicate longer than that could not be written at all
-- ("index row size exceeds btree maximum"). Chroma and MemPalace's SQLite graph store them. From here on
-- no index holds a caller's text whole:
-- * where a value must be unique or looked up exactly (record ids, palace keys, facet keys, entity ids,
--   triple ids, predicates, source drawer ids), the index holds text_key(value): the value's own UTF-8
--   bytes when it has at most 1,024 of them, otherwise a zero byte and its SHA-256. Text never holds a
--   zero byte, so the two kinds of key cannot meet, and equal keys mean equal values;
-- * record ids are also in a hash index, so "id = ..." (the backend's lookups, the views, your psql)
--   finds any id by itself, whatever its length;
-- * where an index serves a filter or an order (wing, room, source_file, filed_at, the timeline's triple
--   id), it holds the value's first characters (left(value, n)); queries compare that prefix to find
--   candidates through the index, then the whole value, so equality stays exact;
-- * the name-token indexes of the fuzzy entity search hold each token's first 200 characters.
-- Every lookup of the functions below is rewritten to use the new keys; signatures and results do not
-- change.

-- ---------------------------------------------------------------------------------------------------
-- The key function. IMMUTABLE although convert_to() is only STABLE: the database encoding is UTF-8
-- (mempalace-pg refuses any other), fixed when the database was created, so the bytes of a text never
-- change. PL/pgSQL rather than SQL: a SQL function that cannot be inlined (this one, for the stable
-- call) sets up the SQL-function executor on every call, which costs more than a PL/pgSQL call whose
-- expressions are prepared once per session, and every write of a record calls it.
CREATE FUNCTION text_key(v text) RETURNS bytea
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
BEGIN
    IF octet_length(v) <= 1024 THEN
        RETURN convert_to(v, 'UTF8');
    END IF;
    RETURN '\x00'::bytea || sha256(convert_to(v, 'UTF8'));
END
$$;
COMMENT ON FUNCTION text_key(text) IS
    'The index key of a text of any length: its UTF-8 bytes up to 1,024 bytes, else a zero byte and its SHA-256. Equal keys mean equal texts.';

-- A graph property's key (as text_key), for the label-table indexes below. Inlined by the planner, so an
-- index on kg_key(properties, 'x') and a query written with kg_key(properties, 'x') meet.
CREATE FUNCTION kg_key(props ag_catalog.agtype, key text) RETURNS bytea
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT :"schema".text_key(:"schema".kg_text(props, key)) $$;
COMMENT ON FUNCTION kg_key(ag_catalog.agtype, text) IS 'text_key() of a vertex or edge property.';

-- The fuzzy entity search's tokens: a name (ASCII-folded) split at sep, each token cut to 200 characters.
CREATE FUNCTION kg_tokens(v text, sep text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT ARRAY(SELECT left(t, 200) FROM unnest(string_to_array(:"schema".kg_fold(v), sep)) AS t) $$;
COMMENT ON FUNCTION kg_tokens(text, text) IS
    'Tokens of a name for the candidate search: ASCII-folded, split at sep, each cut to 200 characters.';

-- ---------------------------------------------------------------------------------------------------
-- Palaces: a palace key is the palace directory's path, which may be long.
ALTER TABLE palaces DROP CONSTRAINT palaces_namespace_palace_key_key;
CREATE UNIQUE INDEX palaces_key ON palaces (text_key(namespace), text_key(palace_key));

-- Records: identity by key, lookups by hash, filters by prefix.
ALTER TABLE records DROP CONSTRAINT records_pkey;
CREATE UNIQUE INDEX records_key ON records (collection_pk, text_key(id));
COMMENT ON INDEX records_key IS 'One record per id in a collection (the key of add/upsert; text_key() so that ids of any length fit).';
CREATE INDEX records_id ON records USING hash (id);
COMMENT ON INDEX records_id IS 'Finds a record by id = ..., whatever the id''s length.';

DROP INDEX records_wing_room, records_room, records_source_file, records_filed_at;
CREATE INDEX records_wing_room   ON records (left(wing, 256), left(room, 256));
CREATE INDEX records_room        ON records (left(room, 256));
CREATE INDEX records_source_file ON records (left(source_file, 600));
CREATE INDEX records_filed_at    ON records ((left(filed_at, 256)) COLLATE "C" DESC NULLS LAST);
COMMENT ON INDEX records_wing_room IS 'Filters by wing (and room): the first 256 characters of each, then the whole value.';
COMMENT ON INDEX records_source_file IS 'Filters by source_file (once per mined file): its first 600 characters, then the whole path.';
COMMENT ON INDEX records_filed_at IS 'Newest first (get_recent): the first 256 characters of filed_at, ties ordered by the whole value.';

-- Facet counts: wing and room values of any length.
ALTER TABLE facet_counts DROP CONSTRAINT facet_counts_key;
CREATE UNIQUE INDEX facet_counts_key ON facet_counts
    (collection_pk, text_key(wing::text), text_key(room::text)) NULLS NOT DISTINCT;

CREATE OR REPLACE FUNCTION records_count_facets() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO facet_counts AS f (collection_pk, wing, room, n)
        SELECT collection_pk, metadata -> 'wing', metadata -> 'room', count(*)
        FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (collection_pk, text_key(wing::text), text_key(room::text)) DO UPDATE SET n = f.n + EXCLUDED.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO facet_counts AS f (collection_pk, wing, room, n)
        SELECT collection_pk, metadata -> 'wing', metadata -> 'room', -count(*)
        FROM old_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (collection_pk, text_key(wing::text), text_key(room::text)) DO UPDATE SET n = f.n + EXCLUDED.n;
    ELSE
        INSERT INTO facet_counts AS f (collection_pk, wing, room, n)
        SELECT collection_pk, wing, room, sum(d) FROM (
            SELECT collection_pk, metadata -> 'wing' AS wing, metadata -> 'room' AS room, 1 AS d FROM new_rows
            UNION ALL
            SELECT collection_pk, metadata -> 'wing', metadata -> 'room', -1 FROM old_rows
        ) AS delta GROUP BY 1, 2, 3 HAVING sum(d) <> 0 ORDER BY 1, 2, 3
        ON CONFLICT (collection_pk, text_key(wing::text), text_key(room::text)) DO UPDATE SET n = f.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END
$fn$;

-- ---------------------------------------------------------------------------------------------------
-- The graph's indexes, by key.
DROP INDEX :"graph".entity_key, :"graph".fact_triple_id, :"graph".fact_open, :"graph".fact_predicate,
           :"graph".fact_timeline, :"graph".fact_source_drawer, :"graph".entity_name_tokens,
           :"graph".entity_id_tokens;
CREATE UNIQUE INDEX entity_key ON :"graph"."Entity" (kg_text(properties, 'palace'), kg_key(properties, 'entity_id'));
CREATE UNIQUE INDEX fact_triple_id ON :"graph"."Fact" (kg_text(properties, 'palace'), kg_key(properties, 'triple_id'));
CREATE INDEX fact_open ON :"graph"."Fact" (start_id, kg_key(properties, 'predicate'), end_id)
    WHERE kg_text(properties, 'valid_to') IS NULL;
CREATE INDEX fact_predicate ON :"graph"."Fact" (kg_text(properties, 'palace'), kg_key(properties, 'predicate'));
-- timeline(): byte order of valid_from, then of the triple id. The index holds the first 64 characters of
-- valid_from (MemPalace's dates have 10 or 20) and the first 200 of the triple id; the statement orders by
-- those, then by the whole values, so MemPalace's order is kept for every value MemPalace writes (a
-- replicated row's valid_from longer than 64 characters sorts by its first 64, then by triple id).
CREATE INDEX fact_timeline ON :"graph"."Fact" (kg_text(properties, 'palace'),
                                               (left(kg_text(properties, 'valid_from'), 64) COLLATE "C"),
                                               (left(kg_text(properties, 'triple_id'), 200) COLLATE "C"));
CREATE INDEX fact_source_drawer ON :"graph"."Fact" (kg_text(properties, 'palace'), kg_key(properties, 'source_drawer_id'));
CREATE INDEX entity_name_tokens ON :"graph"."Entity" USING gin (kg_tokens(kg_text(properties, 'name'), ' '));
CREATE INDEX entity_id_tokens ON :"graph"."Entity" USING gin (kg_tokens(kg_text(properties, 'entity_id'), '_'));

-- ---------------------------------------------------------------------------------------------------
-- The functions that look entities and facts up, rewritten to use the keys (same signatures and results).

CREATE OR REPLACE FUNCTION kg_find_vertex(p_palace integer, p_key text) RETURNS ag_catalog.graphid
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN (SELECT e.id FROM :"graph"."Entity" e
            WHERE :"schema".kg_text(e.properties, 'palace') = p_palace::text
              AND :"schema".kg_key(e.properties, 'entity_id') = :"schema".text_key(p_key));
END
$$;

CREATE OR REPLACE FUNCTION kg_ensure_entity(p_palace integer, p_key text, p_name text) RETURNS ag_catalog.graphid
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    v ag_catalog.graphid;
    is_stub boolean;
BEGIN
    SELECT id, kg_text(properties, 'stub') IS NOT NULL INTO v, is_stub
    FROM :"graph"."Entity"
    WHERE kg_text(properties, 'palace') = p_palace::text AND kg_key(properties, 'entity_id') = text_key(p_key);
    IF v IS NOT NULL THEN
        IF is_stub THEN
            UPDATE :"graph"."Entity" SET properties = kg_entity_props(p_palace, p_key, p_name, 'unknown', '{}', kg_now())
            WHERE id = v;
        END IF;
        RETURN v;
    END IF;
    INSERT INTO :"graph"."Entity" (properties)
    VALUES (kg_entity_props(p_palace, p_key, p_name, 'unknown', '{}', kg_now()))
    ON CONFLICT (kg_text(properties, 'palace'), kg_key(properties, 'entity_id')) DO NOTHING
    RETURNING id INTO v;
    RETURN coalesce(v, kg_find_vertex(p_palace, p_key));  -- NULL only if created concurrently: read it
END
$$;

CREATE OR REPLACE FUNCTION kg_vertex_or_stub(p_palace integer, p_key text) RETURNS ag_catalog.graphid
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    v ag_catalog.graphid := kg_find_vertex(p_palace, p_key);
BEGIN
    IF v IS NULL THEN
        INSERT INTO :"graph"."Entity" (properties) VALUES (kg_stub_props(p_palace, p_key))
        ON CONFLICT (kg_text(properties, 'palace'), kg_key(properties, 'entity_id')) DO NOTHING
        RETURNING id INTO v;
        v := coalesce(v, kg_find_vertex(p_palace, p_key));
    END IF;
    RETURN v;
END
$$;

CREATE OR REPLACE FUNCTION kg_add_entity(p_palace integer, p_key text, p_name text, p_type text, p_attributes text)
    RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO :"graph"."Entity" (properties)
    VALUES (:"schema".kg_entity_props(p_palace, p_key, p_name, p_type, p_attributes, :"schema".kg_now()))
    ON CONFLICT (:"schema".kg_text(properties, 'palace'), :"schema".kg_key(properties, 'entity_id'))
    DO UPDATE SET properties = excluded.properties;
END
$$;

CREATE OR REPLACE FUNCTION kg_open_fact(p_palace integer, s ag_catalog.graphid, p_predicate text, o ag_catalog.graphid,
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

CREATE OR REPLACE FUNCTION kg_close_open(p_palace integer, s ag_catalog.graphid, p_predicate text, o ag_catalog.graphid,
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
              WHERE start_id = s AND kg_key(properties, 'predicate') = text_key(p_predicate) AND end_id = o
                AND kg_text(properties, 'valid_to') IS NULL
              ORDER BY kg_text(properties, 'seq')::bigint
    LOOP
        PERFORM kg_check_boundary(p_at, vf, p_label);
    END LOOP;
    UPDATE :"graph"."Fact" SET properties = kg_with(properties, 'valid_to', p_at)
    WHERE start_id = s AND kg_key(properties, 'predicate') = text_key(p_predicate) AND end_id = o
      AND kg_text(properties, 'valid_to') IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
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

CREATE OR REPLACE FUNCTION kg_apply_entity(p_palace integer, p_key text, p_name text, p_type text, p_attributes text,
                                           p_created_at text, p_skip_unchanged boolean DEFAULT false) RETURNS text
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    v ag_catalog.graphid;
    cur jsonb;
BEGIN
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
    s ag_catalog.graphid := kg_vertex_or_stub(p_palace, p_subject_key);
    o ag_catalog.graphid := kg_vertex_or_stub(p_palace, p_object_key);
    e ag_catalog.graphid;
    cur_s ag_catalog.graphid;
    cur_o ag_catalog.graphid;
    cur jsonb;
BEGIN
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

CREATE OR REPLACE FUNCTION kg_neighbourhood(p_palace integer, p_entity_id text, p_hops integer, p_as_of text DEFAULT NULL)
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
    WHERE kg_text(e.properties, 'palace') = p_palace::text AND kg_key(e.properties, 'entity_id') = text_key(p_entity_id);
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

CREATE OR REPLACE FUNCTION kg_mark_drawers_deleted(p_palace integer, p_drawer_ids text[]) RETURNS integer
    LANGUAGE plpgsql
    SET search_path FROM CURRENT
    AS $$
DECLARE
    n integer;
BEGIN
    UPDATE :"graph"."Fact" f SET properties = kg_with(f.properties, 'source_drawer_deleted_at', kg_now())
    WHERE kg_text(f.properties, 'palace') = p_palace::text
      AND kg_key(f.properties, 'source_drawer_id') = ANY (ARRAY(SELECT text_key(d) FROM unnest(p_drawer_ids) AS d));
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- The evidence view joins a fact's source drawer by id: the hash index on records.id serves it.
