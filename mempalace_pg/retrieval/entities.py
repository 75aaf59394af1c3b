"""The entities a query is about: those named in the drawers nearest to it, and their neighbours."""

from __future__ import annotations

import re
from typing import Optional, Sequence

from psycopg import sql

from mempalace_pg.db.sqlkit import Kept, clamped_row_count, row_count
from mempalace_pg.graph.values import entity_id_of
from mempalace_pg.retrieval.base import SearchBase, loaded_json, wing_room_keys


class EntitiesForQuery(SearchBase):
    # -- 3. entities related to a query -------------------------------------------------------------
    # Long because its statement is written out as one SQL block (a clause a line), not by branching.
    def entities_for_query(
        self,
        query_embedding: Sequence[float],
        *,
        n_results: int = 10,
        drawers: int = 50,
        as_of: Optional[str] = None,
        wing: Optional[str] = None,
        room: Optional[str] = None,
        query_text: Optional[str] = None,
    ) -> list[dict]:
        """Entities ranked by the similarity of the drawers linked to them.

        The ``drawers`` drawers nearest to the query (filtered by wing/room) are taken; every fact drawn
        from one of them (valid at ``as_of``) links the drawer to its subject and object. An entity's
        score is the best similarity among its linked drawers; ties go to the entity with more linked
        drawers. With ``query_text``, the entities it names (a run of its words that is an entity's
        name, as MemPalace makes ids of names) come first, also when no near drawer links to them
        (score None). Each result: ``{"entity_id", "name", "type", "score", "drawers", "facts",
        "best_drawer", "named"}``.
        """
        col = self.drawers()
        n = clamped_row_count(n_results)
        if col is None or n == 0:
            return []
        palace = self.kg.palace_pk()
        keys = wing_room_keys(wing, room)
        values = {"as_of": self._as_of(as_of), "named": named_ids(query_text)}
        values["q"], dim = self._vector(col, query_embedding)

        def build():
            where = self._where(wing, room)
            condition, cparams = col.partition.condition(where)
            near, p_near = self._nearest_ids(col, condition, cparams, keys, max(1, int(drawers)), dim)
            t = self._fn("kg_text")
            # The two LATERAL subqueries end in OFFSET 0 so that the planner keeps them as index probes per
            # hit and per entity. Flattened, it costs AGE's property accessors as nearly free and, on a small
            # graph, reads every Fact and Entity row instead, which is slower than probing.
            query = sql.SQL(
                "WITH hits AS MATERIALIZED ({near}),"
                # per hit, its facts through the (palace, source_drawer_id) index
                " links AS MATERIALIZED (SELECT f.id AS edge, f.start_id, f.end_id, h.id AS drawer, 1 - "
                "h.distance AS similarity"
                "  FROM hits h CROSS JOIN LATERAL (SELECT * FROM {fact} f WHERE {t}(f.properties, 'palace') "
                "= %(palace)s::text"
                "   AND {key}(f.properties, 'source_drawer_id') = {text_key}(h.id)"
                "   AND {valid}(f.properties, %(as_of)s) OFFSET 0) AS f),"
                " ends AS (SELECT start_id AS vertex, edge, drawer, similarity FROM links"
                "  UNION SELECT end_id, edge, drawer, similarity FROM links),"
                " ranked AS (SELECT vertex, max(similarity) AS score, count(DISTINCT drawer) AS drawers,"
                "  count(DISTINCT edge) AS facts,"
                "  (array_agg(drawer ORDER BY similarity DESC, drawer))[1] AS best_drawer FROM ends GROUP "
                "BY vertex),"
                # the entities the query names, through the (palace, entity_id) index
                " named AS MATERIALIZED (SELECT e.id AS vertex FROM {entity} e"
                "  WHERE {t}(e.properties, 'palace') = %(palace)s::text AND {key}(e.properties, 'entity_id')"
                "  = ANY (ARRAY(SELECT {text_key}(x) FROM unnest(%(named)s::text[]) AS x))),"
                " both_ AS (SELECT coalesce(r.vertex, m.vertex) AS vertex, r.score,"
                "  coalesce(r.drawers, 0) AS drawers, coalesce(r.facts, 0) AS facts, r.best_drawer,"
                "  m.vertex IS NOT NULL AS named FROM ranked r FULL JOIN named m ON m.vertex = r.vertex),"
                " top AS (SELECT ent.entity_id, ent.name, ent.type, r.score, r.drawers, r.facts, "
                "r.best_drawer, r.named"
                "  FROM both_ r CROSS JOIN LATERAL (SELECT {t}(e.properties, 'entity_id') AS entity_id,"
                "   {t}(e.properties, 'name') AS name, {t}(e.properties, 'type') AS type FROM {entity} e"
                "   WHERE e.id = r.vertex AND {t}(e.properties, 'stub') IS NULL OFFSET 0) AS ent"
                "  ORDER BY r.named DESC, r.score DESC NULLS LAST, r.drawers DESC, ent.entity_id LIMIT {n})"
                " SELECT coalesce(jsonb_agg(to_jsonb(top) ORDER BY named DESC, score DESC NULLS LAST,"
                " drawers DESC, entity_id), '[]') FROM top"
            ).format(
                near=near,
                fact=self._fact,
                t=t,
                valid=self._fn("kg_valid_at"),
                entity=self._entity,
                key=self._fn("kg_key"),
                text_key=self._fn("text_key"),
                n=row_count(n),
            )
            return Kept(query, {**p_near, "palace": palace})

        row = self._execute(
            self._cache.get(
                (
                    "entities",
                    n,
                    max(1, int(drawers)),
                    tuple(keys.items()),
                    col.partition.index.layout(start_folder=True),
                ),
                build,
            ),
            **values,
        )
        return loaded_json(row[0])


#: The longest run of a query's words looked up as an entity's name.
NAME_WORDS = 4
#: Only the first NAME_QUERY_WORDS words of a query are looked up: a pasted page would otherwise make
#: thousands of index probes for names a question does not hold.
NAME_QUERY_WORDS = 100


def named_ids(query_text: Optional[str]) -> list[str]:
    """The entity ids (MemPalace's: lower case, ``_`` for spaces, no apostrophes) of every run of up to
    NAME_WORDS words of ``query_text`` (its first NAME_QUERY_WORDS), each word stripped of the
    punctuation around it and tried with and without a possessive ``'s``."""
    if not query_text:
        return []
    words = []
    for raw in query_text.split()[:NAME_QUERY_WORDS]:
        word = raw.strip('.,;:!?()[]{}"`«»“”‘’')
        if word:
            bare = re.sub(r"['’]s$", "", word, flags=re.IGNORECASE)
            words.append({word, bare} if bare else {word})
    ids = set()
    for i in range(len(words)):
        runs = [""]
        for word in words[i : i + NAME_WORDS]:
            runs = [f"{r} {w}".strip() for r in runs for w in word]
            ids.update(entity_id_of(r.replace("’", "'")) for r in runs)
    return sorted(ids)


__all__ = ["EntitiesForQuery", "NAME_WORDS", "NAME_QUERY_WORDS", "named_ids"]
