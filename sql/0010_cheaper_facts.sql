-- mempalace-pg schema, revision 0010: add_triple without the work it did not need.
--
-- Applied by Alembic (migrations/versions/0010_cheaper_facts.py), search_path = our schema, the schema
-- holding pgvector, ag_catalog. A template like 0002: :"schema" and :"graph" are our schema and the AGE
-- graph, rendered by mempalace-pg after validating the names.
--
-- Where an add_triple spent its time in the server (issue 27, measured call by call in one transaction):
--
-- * Writing an entity cost several times what writing a fact did, nearly all of it the two GIN token
--   indexes of the fuzzy name search: kg_tokens() was a SQL function holding a subquery, which
--   PostgreSQL cannot inline, so every entity insert planned it anew for each of the two indexes. As
--   PL/pgSQL its plan is made once per session. It returns exactly what it returned before, for every
--   input, so the indexes built with it stay valid and nothing is rebuilt.
--
-- Folding add_triple's vertex lookups and open-fact check into its own body (no nested calls) was tried
-- beside this and saved little of its execution: too little to keep a second copy of the open-fact rule
-- of kg_open_fact(), so add_triple stays as the earlier revisions left it.

CREATE OR REPLACE FUNCTION kg_tokens(v text, sep text) RETURNS text[]
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    RETURN ARRAY(SELECT left(t, 200) FROM unnest(string_to_array(:"schema".kg_fold(v), sep)) AS t);
END
$$;
