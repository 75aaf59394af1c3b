"""An entity's facts with the drawers they were drawn from, nearest to a query first."""

from __future__ import annotations

from typing import Optional, Sequence

from psycopg import sql

from mempalace_pg.db.sqlkit import Kept, clamped_row_count, row_count
from mempalace_pg.graph.sql_parts import DIRECTIONS, SIDES
from mempalace_pg.graph.values import checked_text, entity_id_of
from mempalace_pg.retrieval.base import SearchBase, evidence_state, loaded_json
from mempalace_pg.store.collection import PostgresCollection


class FactsWithEvidence(SearchBase):
    # -- 2. facts with evidence -------------------------------------------------------------------
    # Long because its statement is written out as one SQL block (a clause a line), not by branching.
    def facts_with_evidence(
        self,
        entity: str,
        query_embedding: Optional[Sequence[float]] = None,
        *,
        as_of: Optional[str] = None,
        direction: str = "both",
        limit: int = 100,
    ) -> dict:
        """The facts about ``entity`` (valid at ``as_of``), each with the drawer it was drawn from and
        that drawer's similarity to the query, best-supported first (similarity, then confidence; facts
        without a drawer last).

        Returns ``{"entity_found", "facts"}``; each fact is MemPalace's ``query_entity`` row (direction,
        subject, predicate, object, valid_from, valid_to, confidence, current) plus ``triple_id``,
        ``source_drawer_id``, ``evidence`` (``present``/``refiled``/``deleted``/``missing``/None) and
        the drawer's ``document``, ``wing``, ``room`` and ``similarity`` (None without a query).
        """
        if direction not in DIRECTIONS:
            raise ValueError("direction must be 'outgoing', 'incoming' or 'both'")
        entity = checked_text(entity, "entity", required=True)
        as_of_key = self._as_of(as_of)
        col = self.drawers()
        palace = self.kg.palace_pk()
        limit = clamped_row_count(limit)
        values = {"entity": entity_id_of(entity), "as_of": as_of_key, "q": None}
        if query_embedding is not None and col is not None:
            values["q"], _ = self._vector(col, query_embedding)

        def build():
            t = self._fn("kg_text")
            arms = []
            # A fact from the entity to itself is in both arms with one seq: direction breaks that tie,
            # or two calls could list the pair in either order.
            for side in DIRECTIONS[direction]:
                name, near, _ = SIDES[side]
                arms.append(
                    sql.SQL(
                        "SELECT {name} AS direction, f.* FROM {fact} f WHERE f.{near} IN (SELECT id FROM v)"
                    ).format(name=sql.Literal(name), fact=self._fact, near=sql.Identifier(near))
                )
            drawer, d_cols, similarity, dparams = self._evidence_join(col)
            query = sql.SQL(
                "WITH v AS MATERIALIZED (SELECT e.id FROM {entity} e WHERE {t}(e.properties, 'palace') = "
                "%(palace)s::text"
                "  AND {key}(e.properties, 'entity_id') = {text_key}(%(entity)s)),"
                " f AS (SELECT * FROM ({arms}) AS a WHERE {valid}(a.properties, %(as_of)s)),"
                " rows AS (SELECT f.direction, {fact_json} AS fact, {d_cols}, {similarity} AS similarity,"
                "  {t}(f.properties, 'seq')::bigint AS seq"
                "  FROM f JOIN {entity} s ON s.id = f.start_id JOIN {entity} o ON o.id = f.end_id {drawer}"
                "  ORDER BY similarity DESC NULLS LAST, ({t}(f.properties, 'confidence'))::float8 DESC "
                "NULLS LAST,"
                "  seq, f.direction LIMIT {limit})"
                " SELECT (SELECT count(*) FROM v), (SELECT coalesce(jsonb_agg(rows.fact || "
                "jsonb_build_object("
                "  'direction', rows.direction, 'drawer_found', rows.drawer IS NOT NULL, 'document', "
                "rows.document,"
                "  'wing', rows.wing, 'room', rows.room, 'similarity', rows.similarity)"
                "  ORDER BY rows.similarity DESC NULLS LAST, (rows.fact ->> 'confidence')::float8 DESC "
                "NULLS LAST,"
                "  rows.seq, rows.direction), '[]') FROM rows)"
            ).format(
                entity=self._entity,
                t=t,
                arms=sql.SQL(" UNION ALL ").join(arms),
                valid=self._fn("kg_valid_at"),
                key=self._fn("kg_key"),
                text_key=self._fn("text_key"),
                fact_json=self._fact_json("f"),
                d_cols=d_cols,
                similarity=similarity,
                drawer=drawer,
                limit=row_count(limit),
            )
            return Kept(query, {"palace": palace, **dparams})

        row = self._execute(self._cache.get(("facts", direction, col is None, limit), build), **values)
        facts = loaded_json(row[1])
        for fact in facts:
            fact["evidence"] = evidence_state(fact)
            # MemPalace's query_entity names the queried entity as it was passed
            fact["subject" if fact["direction"] == "outgoing" else "object"] = entity
        return {"entity_found": row[0] > 0, "facts": facts}

    def _evidence_join(self, col: Optional[PostgresCollection]) -> tuple[sql.Composable, ...]:
        """facts_with_evidence's join of each fact to its source drawer: the join, the drawer's columns,
        its similarity to ``%(q)s`` (NULL without a query) and the join's parameters (a palace without
        drawers gets NULLs)."""
        if col is None:
            return (
                sql.SQL(""),
                sql.SQL("NULL AS drawer, NULL AS document, NULL AS wing, NULL AS room"),
                sql.SQL("NULL::float8"),
                {},
            )
        drawer = sql.SQL(
            "LEFT JOIN {rec} d ON d.collection_pk = %(pk)s AND d.id = {t}(f.properties, 'source_drawer_id')"
        ).format(rec=col.partition.table, t=self._fn("kg_text"))
        similarity = sql.SQL(
            "CASE WHEN d.id IS NULL OR %(q)s::vector IS NULL THEN NULL"
            " ELSE 1 - (d.embedding <=> %(q)s::vector) END"
        )
        return (
            drawer,
            sql.SQL("d.id AS drawer, d.document, d.wing, d.room"),
            similarity,
            {"pk": col.partition.pk},
        )


__all__ = ["FactsWithEvidence"]
