"""Hybrid search: vector and full-text rankings fused by reciprocal rank, in one statement."""

from __future__ import annotations

import math
from typing import Optional, Sequence

from psycopg import sql

from mempalace_pg.db.sqlkit import Kept, clamped_row_count, row_count
from mempalace_pg.engine import nearest
from mempalace_pg.graph.values import checked_text
from mempalace_pg.retrieval.base import loaded_json, wing_room_keys
from mempalace_pg.retrieval.staleness import Staleness, checked_stale_mode
from mempalace_pg.store import search

#: Reciprocal rank fusion constant (the usual 60): a document's fused score is sum(1 / (k + rank)).
RRF_K = 60
#: How many candidates each ranking contributes to hybrid search (at least 4 x n_results).
HYBRID_CANDIDATES = 50
#: The weight of the full-text ranking in the fusion, the vector ranking's being 1. Half: in a small
#: haystack (a room) every drawer is in the vector ranking while only those sharing a word with the
#: query are in the full-text one, and at equal weights any shared word outranked the nearest meaning
#: (benchmarks/bench_longmemeval.py, RESULTS.md).
TEXT_WEIGHT = 0.5


class HybridSearch(Staleness):
    # -- 4. hybrid search -------------------------------------------------------------------------------
    # Long because its statement is written out as one SQL block (a clause a line), not by branching.
    def hybrid(
        self,
        query_text: str,
        query_embedding: Sequence[float],
        *,
        n_results: int = 10,
        wing: Optional[str] = None,
        room: Optional[str] = None,
        k: int = RRF_K,
        candidates: int = HYBRID_CANDIDATES,
        text_weight: float = TEXT_WEIGHT,
        as_of: Optional[str] = None,
        stale: Optional[str] = "mark",
    ) -> list[dict]:
        """Vector and full-text rankings fused by reciprocal rank fusion, in one statement.

        Each ranking contributes its best ``max(candidates, 4 x n_results)`` drawers (full text: the
        backend's ``lexical_search`` ranking, rare words weigh more); a drawer's score is
        ``sum(weight / (k + rank))`` over the rankings it appears in (``text_weight`` for the full-text
        ranking, 1 for the vector one: weighted reciprocal rank fusion); equal scores go to the better vector
        rank (then the id), so the order does not depend on how ids happen to sort. Each result:
        ``{"id", "document", "metadata", "score", "vector_rank", "text_rank", "distance", "text_score"}``,
        best first.

        ``stale`` (:mod:`~mempalace_pg.retrieval.staleness`): ``"mark"`` adds each result's ``stale`` and
        ``standing`` (the facts drawn from it, at ``as_of`` or now); ``"demote"`` also ranks stale
        drawers after the others (taken from twice the results, so current ones can move up); None
        leaves them out (one statement less).
        """
        if stale is not None:
            checked_stale_mode(stale)  # before the search, not after it
        col = self.drawers()
        n = clamped_row_count(n_results)
        if col is None or n == 0:
            return []
        wanted, n = n, (clamped_row_count(2 * n) if stale == "demote" else n)
        keys = wing_room_keys(wing, room)
        depth = max(int(candidates), 4 * n)
        values = {
            "text": checked_text(query_text, "query_text") or "",
            "text_weight": checked_weight(text_weight),
        }
        values["q"], dim = self._vector(col, query_embedding)

        def build():
            where = self._where(wing, room)
            condition, cparams = col.partition.condition(where)
            near, p_near = self._nearest_ids(col, condition, cparams, keys, depth, dim)
            gate = nearest.wing_room_gate(col.partition.index, keys)
            lexical, p_lex = search.lexical_sql(
                col.partition, condition, cparams, depth, rows=False, gate=gate
            )
            query = sql.SQL(
                "WITH vec AS MATERIALIZED (SELECT id, distance, row_number() OVER (ORDER BY distance, id) "
                "AS rank"
                "  FROM ({near}) AS v),"
                " lex AS MATERIALIZED (SELECT id, score, row_number() OVER (ORDER BY score DESC, id) AS rank"
                "  FROM ({lexical}) AS l WHERE score > 0),"
                # an exact tie (ranks 1 and 2 crossed) goes to the nearer vector, not to the id
                " fused AS (SELECT id, sum(w / (%(rrf_k)s + rank))::float8 AS score, min(vrank) AS vrank"
                "  FROM (SELECT id, rank, rank AS vrank, 1.0::float8 AS w FROM vec"
                "   UNION ALL SELECT id, rank, NULL, %(text_weight)s::float8 FROM lex) AS u"
                "  GROUP BY id ORDER BY score DESC, vrank NULLS LAST, id LIMIT {n})"
                " SELECT coalesce(jsonb_agg(jsonb_build_object('id', f.id, 'document', d.document, "
                "'metadata', d.metadata,"
                "  'score', f.score, 'vector_rank', vec.rank, 'text_rank', lex.rank, 'distance', "
                "vec.distance,"
                "  'text_score', lex.score) ORDER BY f.score DESC, f.vrank NULLS LAST, f.id), '[]')"
                " FROM fused f JOIN {rec} d ON d.collection_pk = %(pk)s AND d.id = f.id"
                " LEFT JOIN vec ON vec.id = f.id LEFT JOIN lex ON lex.id = f.id"
            ).format(near=near, lexical=lexical, rec=col.partition.table, n=row_count(n))
            params = {**p_near, **p_lex, "rrf_k": int(k), "pk": col.partition.pk}
            return Kept(query, params)

        row = self._execute(
            self._cache.get(
                (
                    "hybrid",
                    n,
                    depth,
                    int(k),
                    tuple(keys.items()),
                    col.partition.index.layout(start_folder=True),
                ),
                build,
            ),
            **values,
        )
        rows = loaded_json(row[0])
        if stale is None:
            return rows[:wanted]
        return self.mark_stale(rows, as_of=as_of, stale=stale, n=wanted)


def checked_weight(value) -> float:
    """A fusion weight: a finite number from 0 to 1 (0 leaves the full-text ranking out)."""
    try:
        weight = float(value)
    except (TypeError, ValueError):
        weight = math.nan
    if not 0.0 <= weight <= 1.0:  # also NaN
        raise ValueError(f"text_weight must be a number from 0 to 1, not {value!r}")
    return weight


__all__ = ["HybridSearch", "RRF_K", "HYBRID_CANDIDATES", "TEXT_WEIGHT", "checked_weight"]
