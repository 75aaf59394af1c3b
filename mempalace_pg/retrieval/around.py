"""Drawers around an entity: the graph's neighbourhood of an entity, joined with the nearest drawers."""

from __future__ import annotations

import re
from typing import Optional, Sequence

from psycopg import sql

from mempalace_pg.db.sqlkit import Kept, clamped_row_count, row_count
from mempalace_pg.engine import nearest
from mempalace_pg.graph.values import checked_text, entity_id_of
from mempalace_pg.retrieval.base import SearchBase, loaded_json, wing_room_keys
from mempalace_pg.retrieval.hybrid import RRF_K
from mempalace_pg.store.collection import PostgresCollection

#: In "boost" mode, how much a drawer that is evidence for the neighbourhood gains (added to its
#: cosine similarity, which lies in [-1, 1]).
DEFAULT_BOOST = 0.1
#: How around_entity ranks: the neighbourhood's source drawers only, or all drawers with the sources
#: boosted by a fixed amount or fused by rank (see around_entity).
AROUND_MODES = ("restrict", "boost", "fuse")


def query_without_entity(query: str, entity: str) -> str:
    """``query`` with the entity's name taken out (whole words, any case, with a possessive 's), for the
    vector that ranks drawers around that entity: the entity already chose the neighbourhood, and its
    name in the question makes the drawers that name it the nearest whatever the question asks about
    them. A query that is nothing but the name is returned whole."""
    name = re.escape(" ".join(entity.split())).replace(r"\ ", r"\s+")
    rest = re.sub(rf"(?<!\w){name}(?:['’]s)?(?!\w)", " ", query, flags=re.IGNORECASE)
    rest = " ".join(rest.split())
    return rest if re.search(r"\w", rest) else query


class AroundEntity(SearchBase):
    # -- 1. search around an entity -------------------------------------------------------------
    # Long because its statement is written out as one SQL block (a clause a line), not by branching.
    def around_entity(
        self,
        entity: str,
        query_embedding: Sequence[float],
        *,
        hops: int = 1,
        as_of: Optional[str] = None,
        n_results: int = 10,
        mode: str = "restrict",
        boost: float = DEFAULT_BOOST,
        wing: Optional[str] = None,
        room: Optional[str] = None,
    ) -> dict:
        """Drawers most similar to the query among what is known about the entities within ``hops``
        hops of ``entity`` (valid at ``as_of``).

        ``mode="restrict"``: only drawers that are the source of a fact in that neighbourhood.
        ``mode="boost"``: all drawers, those sources ranked up by ``boost`` (added to similarity).
        ``mode="fuse"``: all drawers, ranked by reciprocal rank fusion (k = RRF_K) of two rankings by
        similarity: of every candidate, and of the sources alone; a source is in both, so it goes
        above a drawer that is not unless that one is far nearer.

        Returns ``{"entity_found", "entities", "facts", "evidence_drawers", "hits"}``; each hit is
        ``{"id", "document", "metadata", "distance", "similarity", "score", "evidence", "facts"}``
        (``facts``: the neighbourhood's facts drawn from that drawer), best first.
        """
        if mode not in AROUND_MODES:
            raise ValueError(f"mode must be one of {', '.join(AROUND_MODES)}, not {mode!r}")
        entity = checked_text(entity, "entity", required=True)
        hops, as_of_key, n = self._hops(hops), self._as_of(as_of), clamped_row_count(n_results)
        col = self.drawers()
        palace = self.kg.palace_pk()
        keys = wing_room_keys(wing, room)
        values = {"entity": entity_id_of(entity), "as_of": as_of_key}
        if col is not None and n > 0:
            values["q"], dim = self._vector(col, query_embedding)

        def build():
            t = self._fn("kg_text")
            head, params = self.neighbourhood_ctes(palace, hops)
            counts = sql.SQL(
                "(SELECT count(*) FROM hood), (SELECT count(*) FROM facts), (SELECT count(*) FROM evidence)"
            )
            if col is None or n == 0:
                return Kept(sql.SQL("{} SELECT {}").format(head, counts), params)
            ranked, rparams = self._ranked_drawers(col, self._where(wing, room), keys, mode, n, dim)
            query = sql.SQL(
                "{head}, ranked AS MATERIALIZED ({ranked}),"
                " scored AS (SELECT r.*, {score} AS score FROM ranked r),"
                " hits AS (SELECT r.id, d.document, d.metadata, r.distance, 1 - r.distance AS similarity,"
                "  r.score, r.evidence"
                "  FROM scored r JOIN {t_rec} d ON d.collection_pk = %(pk)s AND d.id = r.id"
                "  WHERE (SELECT count(*) FROM hood) > 0"
                "  ORDER BY score DESC, r.id LIMIT {n})"
                " SELECT {counts}, (SELECT coalesce(jsonb_agg(jsonb_build_object("
                "  'id', h.id, 'document', h.document, 'metadata', h.metadata, 'distance', h.distance,"
                "  'similarity', h.similarity, 'score', h.score, 'evidence', h.evidence,"
                "  'facts', (SELECT coalesce(jsonb_agg({fact_json} ORDER BY {t}(f.properties, "
                "'seq')::bigint), '[]')"
                "    FROM facts c JOIN {fact} f ON f.id = c.id"
                "    JOIN {entity} s ON s.id = f.start_id JOIN {entity} o ON o.id = f.end_id"
                "    WHERE c.drawer = h.id))"
                "  ORDER BY h.score DESC, h.id), '[]') FROM hits h)"
            ).format(
                head=head,
                ranked=ranked,
                t_rec=col.partition.table,
                counts=counts,
                fact_json=self._fact_json("f"),
                t=t,
                entity=self._entity,
                fact=self._fact,
                n=row_count(n),
                score=sql.SQL(
                    "(1.0 / ({k} + row_number() OVER (ORDER BY r.distance, r.id))"
                    " + CASE WHEN r.evidence THEN 1.0 / ({k} + row_number() OVER"
                    " (PARTITION BY r.evidence ORDER BY r.distance, r.id)) ELSE 0 END)::float8"
                ).format(k=sql.Literal(RRF_K))
                if mode == "fuse"
                else sql.SQL("1 - r.distance + CASE WHEN r.evidence THEN %(boost)s ELSE 0 END"),
            )
            boost_value = float(boost) if mode == "boost" else 0.0
            params = {**params, **rparams, "boost": boost_value, "pk": col.partition.pk}
            return Kept(query, params)

        # statements that search vectors are kept per vector index layout (their arms depend on it)
        key = (
            "around",
            hops,
            mode,
            float(boost),
            n,
            tuple(keys.items()),
            col.partition.index.layout(start_folder=True) if col is not None else None,
        )
        row = self._execute(self._cache.get(key, build), **values)
        return {
            "entity_found": row[0] > 0,
            "entities": row[0],
            "facts": row[1],
            "evidence_drawers": row[2],
            "hits": loaded_json(row[3]) if len(row) > 3 else [],
        }

    def _ranked_drawers(
        self, col: PostgresCollection, where: Optional[dict], keys: dict, mode: str, n: int, dim: int
    ) -> tuple[sql.Composable, dict]:
        """around_entity's ``ranked`` drawers (id, distance, evidence) inside the walk's statement: the
        nearest among the evidence drawers (``restrict``), or those and the nearest of all (``boost``)."""
        condition, cparams = col.partition.condition(where)
        cols = sql.SQL("id")
        in_evidence = sql.SQL("{} AND id IN (SELECT drawer_id FROM evidence)").format(condition)
        near_evidence, p_evidence = nearest.nearest_sql(
            col.partition.index,
            columns=cols,
            condition=in_evidence,
            params=cparams,
            n=n if mode == "restrict" else max(n, 4 * n),
            dim=dim,
            filtered=True,
            gate=nearest.Gate(sql.SQL("SELECT count(*) AS n FROM evidence"), {}),
        )
        if mode == "restrict":
            return sql.SQL("SELECT id, distance, true AS evidence FROM ({}) AS e").format(
                near_evidence
            ), p_evidence
        near_all, p_all = self._nearest_ids(col, condition, cparams, keys, max(n, 4 * n), dim)
        ranked = sql.SQL(
            "SELECT id, min(distance) AS distance, bool_or(evidence) AS evidence FROM ("
            " SELECT id, distance, true AS evidence FROM ({}) AS e UNION ALL"
            " SELECT id, distance, id IN (SELECT drawer_id FROM evidence) FROM ({}) AS a) AS u GROUP BY id"
        ).format(near_evidence, near_all)
        return ranked, {**p_evidence, **p_all}


__all__ = ["AroundEntity", "AROUND_MODES", "DEFAULT_BOOST"]
