"""The entities a query is about: those named in the drawers nearest to it, and their neighbours."""

from __future__ import annotations

from typing import Optional, Sequence

from psycopg import sql

from mempalace_pg.db.sqlkit import Kept, clamped_row_count, row_count
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
    ) -> list[dict]:
        """Entities ranked by the similarity of the drawers linked to them.

        The ``drawers`` drawers nearest to the query (filtered by wing/room) are taken; every fact drawn
        from one of them (valid at ``as_of``) links the drawer to its subject and object. An entity's
        score is the best similarity among its linked drawers; ties go to the entity with more linked
        drawers. Each result: ``{"entity_id", "name", "type", "score", "drawers", "facts", "best_drawer"}``.
        """
        col = self.drawers()
        n = clamped_row_count(n_results)
        if col is None or n == 0:
            return []
        palace = self.kg.palace_pk()
        keys = wing_room_keys(wing, room)
        values = {"as_of": self._as_of(as_of)}
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
                " top AS (SELECT ent.entity_id, ent.name, ent.type, r.score, r.drawers, r.facts, "
                "r.best_drawer"
                "  FROM ranked r CROSS JOIN LATERAL (SELECT {t}(e.properties, 'entity_id') AS entity_id,"
                "   {t}(e.properties, 'name') AS name, {t}(e.properties, 'type') AS type FROM {entity} e"
                "   WHERE e.id = r.vertex AND {t}(e.properties, 'stub') IS NULL OFFSET 0) AS ent"
                "  ORDER BY r.score DESC, r.drawers DESC, ent.entity_id LIMIT {n})"
                " SELECT coalesce(jsonb_agg(to_jsonb(top) ORDER BY score DESC, drawers DESC, entity_id), "
                "'[]') FROM top"
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
                ("entities", n, max(1, int(drawers)), tuple(keys.items()), col.partition.layout()), build
            ),
            **values,
        )
        return loaded_json(row[0])


__all__ = ["EntitiesForQuery"]
