"""Retrieval that joins the knowledge graph and the drawer vectors, each in one SQL statement.

    from mempalace_pg.retrieval import PalaceSearch
    search = PalaceSearch(palace_path="~/.mempalace/palace")
    search.around_entity("Alice", query_vector, hops=2, as_of="2026-01-15")
    search.facts_with_evidence("Alice", query_vector)
    search.entities_for_query(query_vector)
    search.hybrid("garden basil decision", query_vector, wing="home")

Each method is one statement, so one round trip and one snapshot: the graph walk, the vector search
and the joins all see the same committed state. Every value is a bound parameter. Query vectors come
from the caller (MemPalace's embedder: see :func:`embed_query`).

How the pieces are found:

* **neighbourhood**: a breadth-first walk over the Fact label table written into the statement, one
  set-based join per hop over the start_id/end_id indexes, never revisiting an entity (the same walk
  as the ``kg_neighbourhood()`` SQL function of sql/0003, which is there for psql);
* **facts within N hops**: the facts that touch an entity closer than N hops (the ones the walk
  crossed), valid at ``as_of`` when given (half-open ``[valid_from, valid_to)``, as MemPalace's
  ``query_entity``); without ``as_of`` every fact counts, as in MemPalace;
* **evidence**: a fact's ``source_drawer_id`` joined to the palace's drawers by primary key;
* **nearest drawers**: the backend's own search (HNSW with iterative scans, or an exact scan when the
  candidate set is small), restricted in SQL.

Unknown entities and empty graphs give empty answers (``entity_found`` tells which), never errors.
"""

from __future__ import annotations

import json
from typing import Any, Optional, Sequence

from mempalace.backends import CollectionNotInitializedError
from psycopg import sql

from mempalace_pg.config import Settings
from mempalace_pg.db.sqlkit import Kept, StatementCache, clamped_row_count, row_count
from mempalace_pg.graph.kg import AgeKnowledgeGraph, checked_text, entity_id_of, mempalace_helpers, start_key
from mempalace_pg.store import search
from mempalace_pg.store.collection import PostgresCollection
from mempalace_pg.store.records import as_matrix

#: Reciprocal rank fusion constant (the usual 60): a document's fused score is sum(1 / (k + rank)).
RRF_K = 60
#: How many candidates each ranking contributes to hybrid search (at least 4 x n_results).
HYBRID_CANDIDATES = 50
#: Hops allowed in a neighbourhood: 1..MAX_HOPS.
MAX_HOPS = 6
#: In "boost" mode, how much a drawer that is evidence for the neighbourhood gains (added to its
#: cosine similarity, which lies in [-1, 1]).
DEFAULT_BOOST = 0.1


def embed_query(text: str) -> list[float]:
    """Embed a query with MemPalace's configured embedder (as ``mempalace search`` does)."""
    from mempalace.embedding import configured_embedding_function

    ef = configured_embedding_function()
    embed = getattr(ef, "embed_query", None)
    vectors = embed(input=[text]) if callable(embed) else ef(input=[text])
    vector = vectors[0]
    return vector.tolist() if hasattr(vector, "tolist") else [float(x) for x in vector]


def embed_documents(texts: Sequence[str], metadatas: Optional[Sequence[dict]] = None) -> list[list[float]]:
    """Embed drawer documents with MemPalace's configured embedder, as MemPalace's own writes do: its
    ``embed_documents`` (given the metadatas when it takes them: some embedders use a drawer's title),
    else the embedder itself."""
    import inspect

    from mempalace.embedding import configured_embedding_function

    ef = configured_embedding_function()
    method = getattr(ef, "embed_documents", None)
    if callable(method):
        takes_metadatas = "metadatas" in inspect.signature(method).parameters
        vectors = (
            method(input=list(texts), metadatas=metadatas) if takes_metadatas else method(input=list(texts))
        )
    else:
        vectors = ef(input=list(texts))
    return [v.tolist() if hasattr(v, "tolist") else [float(x) for x in v] for v in vectors]


class PalaceSearch:
    """Graph-and-vector retrieval over one postgres palace (its drawers and its AGE graph).

    Build it like :class:`~mempalace_pg.graph.kg.AgeKnowledgeGraph`: with the palace directory, or with
    ``palace_key`` (and ``namespace``) for a palace without one.
    """

    def __init__(
        self,
        palace_path: Optional[str] = None,
        *,
        palace_key: Optional[str] = None,
        namespace: Optional[str] = None,
        settings: Optional[Settings] = None,
    ):
        self.settings = settings or Settings.load()
        self.kg = AgeKnowledgeGraph(
            palace_path=palace_path, palace_key=palace_key, namespace=namespace, settings=self.settings
        )
        self.palace_path = palace_path
        self._collection: Optional[PostgresCollection] = None
        self._backend = None
        # statements per query shape, with their constant parameters (each call adds its own)
        self._cache = StatementCache()
        s = sql.Identifier(self.settings.schema)
        g = sql.Identifier(self.settings.graph)
        self._fn = lambda name: sql.SQL("{}.{}").format(s, sql.Identifier(name))
        self._entity = sql.SQL("{}.{}").format(g, sql.Identifier("Entity"))
        self._fact = sql.SQL("{}.{}").format(g, sql.Identifier("Fact"))

    # -- plumbing -----------------------------------------------------------------------------
    def drawers(self) -> Optional[PostgresCollection]:
        """The palace's drawers collection (None while the palace has none)."""
        if self._collection is None:
            from mempalace_pg.atomic import open_drawers

            try:
                self._collection, _ = open_drawers(
                    self.palace_path,
                    palace_key=self.kg.palace_key,
                    namespace=self.kg.namespace,
                    settings=self.settings,
                    create=False,
                )
            except CollectionNotInitializedError:
                return None
            self._backend = self._collection.backend
        return self._collection

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
        self._backend = self._collection = None
        self.kg.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _vector(self, col: PostgresCollection, query_embedding: Sequence[float]) -> tuple[Any, int]:
        matrix = as_matrix([query_embedding], [0], what="query embedding")
        dim = col.partition.known_dimension()
        if dim is not None and matrix.shape[1] != dim:
            from mempalace.backends import DimensionMismatchError

            raise DimensionMismatchError(
                f"query embedding has {matrix.shape[1]} dimensions; the palace's drawers have {dim}"
            )
        return matrix[0], dim

    def _execute(self, entry: Kept, **values) -> tuple:
        """Run a cached statement with its constant parameters and this call's ``values``; one round trip."""

        def work(conn):
            return entry.execute(conn, values).fetchone()

        return self.kg.database().run(work)

    @staticmethod
    def _as_of(as_of: Optional[str]) -> Optional[str]:
        _, sanitize, _ = mempalace_helpers()
        as_of = sanitize(as_of, "as_of")
        return start_key(as_of) if as_of else None

    @staticmethod
    def _hops(hops: int) -> int:
        hops = int(hops)
        if not 1 <= hops <= MAX_HOPS:
            raise ValueError(f"hops must be between 1 and {MAX_HOPS}, not {hops}")
        return hops

    @staticmethod
    def _where(wing: Optional[str], room: Optional[str]) -> Optional[dict]:
        clauses = [{k: v} for k, v in _keys(wing, room).items()]
        return None if not clauses else clauses[0] if len(clauses) == 1 else {"$and": clauses}

    def _fact_json(self, alias: str) -> sql.Composable:
        """A fact as JSON: subject/object by name, predicate, validity, confidence, provenance."""
        t = self._fn("kg_text")
        f = sql.Identifier(alias)
        return sql.SQL(
            "jsonb_build_object('subject', coalesce({t}(s.properties, 'name'), {t}(s.properties, "
            "'entity_id')),"
            " 'predicate', {t}({f}.properties, 'predicate'),"
            " 'object', coalesce({t}(o.properties, 'name'), {t}(o.properties, 'entity_id')),"
            " 'valid_from', {t}({f}.properties, 'valid_from'), 'valid_to', {t}({f}.properties, 'valid_to'),"
            " 'current', {t}({f}.properties, 'valid_to') IS NULL,"
            " 'confidence', ({t}({f}.properties, 'confidence'))::float8,"
            " 'triple_id', {t}({f}.properties, 'triple_id'),"
            " 'source_drawer_id', {t}({f}.properties, 'source_drawer_id'),"
            " 'source_drawer_deleted_at', {t}({f}.properties, 'source_drawer_deleted_at'))"
        ).format(t=t, f=f)

    # Long because its statement is written out as one SQL block (a clause a line), not by branching.
    def _walk(self, palace: int, hops: int) -> tuple[sql.Composable, dict]:
        """CTEs of the neighbourhood of the entity ``%(entity)s`` valid at ``%(as_of)s`` (both the caller's
        per-call parameters), unrolled hop by hop (the statement is prepared once per ``hops``):

        * ``w0`` the entity's vertex; ``e<d>`` the facts (valid at as_of) touching ``w<d-1>``; ``w<d>`` the
          vertices those facts reach that no earlier hop reached (a hashed anti-join: nothing is
          revisited, so a hop costs what its frontier touches);
        * ``hood`` (vertex, depth) over w0..w<hops>; ``facts`` the distinct facts crossed (every fact
          touching an entity closer than ``hops``), with their source drawer as a column; ``evidence``
          those drawers.

        The same walk as the kg_neighbourhood() SQL function, written into the statement so that it is
        planned with it rather than run as separate queries inside a function."""
        t, valid, fact = self._fn("kg_text"), self._fn("kg_valid_at"), self._fact
        drawer = sql.SQL("{}(f.properties, 'source_drawer_id')").format(t)
        parts = [
            sql.SQL(
                "w0 AS MATERIALIZED (SELECT e.id AS vertex FROM {entity} e"
                " WHERE {t}(e.properties, 'palace') = %(palace)s::text"
                " AND {key}(e.properties, 'entity_id') = {text_key}(%(entity)s))"
            ).format(entity=self._entity, t=t, key=self._fn("kg_key"), text_key=self._fn("text_key"))
        ]
        for d in range(1, hops + 1):
            seen = sql.SQL(" UNION ALL ").join(
                sql.SQL("SELECT vertex FROM {}").format(sql.Identifier(f"w{k}")) for k in range(d)
            )
            parts.append(
                sql.SQL(
                    "{e} AS MATERIALIZED ("
                    " SELECT f.id, f.start_id, f.end_id, {drawer} AS drawer, f.end_id AS other FROM {prev} w"
                    "  JOIN {fact} f ON f.start_id = w.vertex WHERE {valid}(f.properties, %(as_of)s)"
                    " UNION ALL"
                    " SELECT f.id, f.start_id, f.end_id, {drawer}, f.start_id FROM {prev} w"
                    "  JOIN {fact} f ON f.end_id = w.vertex WHERE {valid}(f.properties, %(as_of)s)),"
                    " {w} AS MATERIALIZED (SELECT DISTINCT other AS vertex FROM {e}"
                    "  WHERE other NOT IN ({seen}))"
                ).format(
                    e=sql.Identifier(f"e{d}"),
                    w=sql.Identifier(f"w{d}"),
                    prev=sql.Identifier(f"w{d - 1}"),
                    fact=fact,
                    valid=valid,
                    seen=seen,
                    drawer=drawer,
                )
            )
        hood = sql.SQL(" UNION ALL ").join(
            sql.SQL("SELECT vertex, {} AS depth FROM {}").format(sql.Literal(d), sql.Identifier(f"w{d}"))
            for d in range(hops + 1)
        )
        crossed = sql.SQL(" UNION ALL ").join(
            sql.SQL("SELECT id, start_id, end_id, drawer FROM {}").format(sql.Identifier(f"e{d}"))
            for d in range(1, hops + 1)
        )
        parts.append(
            sql.SQL(
                "hood AS MATERIALIZED ({hood}),"
                " facts AS MATERIALIZED (SELECT DISTINCT ON (c.id) c.id, c.start_id, c.end_id, c.drawer"
                "  FROM ({crossed}) AS c),"
                " evidence AS MATERIALIZED (SELECT DISTINCT drawer AS drawer_id FROM facts WHERE drawer IS "
                "NOT NULL)"
            ).format(hood=hood, crossed=crossed, t=t)
        )
        return sql.SQL("WITH ") + sql.SQL(", ").join(parts), {"palace": palace}

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

        Returns ``{"entity_found", "entities", "facts", "evidence_drawers", "hits"}``; each hit is
        ``{"id", "document", "metadata", "distance", "similarity", "score", "evidence", "facts"}``
        (``facts``: the neighbourhood's facts drawn from that drawer), best first.
        """
        if mode not in ("restrict", "boost"):
            raise ValueError("mode must be 'restrict' or 'boost'")
        entity = checked_text(entity, "entity", required=True)
        hops, as_of_key, n = self._hops(hops), self._as_of(as_of), clamped_row_count(n_results)
        col = self.drawers()
        palace = self.kg.palace_pk()
        keys = _keys(wing, room)
        values = {"entity": entity_id_of(entity), "as_of": as_of_key}
        if col is not None and n > 0:
            values["q"], dim = self._vector(col, query_embedding)

        def build():
            t = self._fn("kg_text")
            head, params = self._walk(palace, hops)
            counts = sql.SQL(
                "(SELECT count(*) FROM hood), (SELECT count(*) FROM facts), (SELECT count(*) FROM evidence)"
            )
            if col is None or n == 0:
                return Kept(sql.SQL("{} SELECT {}").format(head, counts), params)
            ranked, rparams = self._ranked_drawers(col, self._where(wing, room), keys, mode, n, dim)
            query = sql.SQL(
                "{head}, ranked AS MATERIALIZED ({ranked}),"
                " hits AS (SELECT r.id, d.document, d.metadata, r.distance, 1 - r.distance AS similarity,"
                "  1 - r.distance + CASE WHEN r.evidence THEN %(boost)s ELSE 0 END AS score, r.evidence"
                "  FROM ranked r JOIN {t_rec} d ON d.collection_pk = %(pk)s AND d.id = r.id"
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
            col.partition.layout() if col is not None else None,
        )
        row = self._execute(self._cache.get(key, build), **values)
        return {
            "entity_found": row[0] > 0,
            "entities": row[0],
            "facts": row[1],
            "evidence_drawers": row[2],
            "hits": _load(row[3]) if len(row) > 3 else [],
        }

    @staticmethod
    def _ranked_drawers(
        col: PostgresCollection, where: Optional[dict], keys: dict, mode: str, n: int, dim: int
    ) -> tuple[sql.Composable, dict]:
        """around_entity's ``ranked`` drawers (id, distance, evidence) inside the walk's statement: the
        nearest among the evidence drawers (``restrict``), or those and the nearest of all (``boost``)."""
        condition, cparams = col.partition.condition(where)
        cols = sql.SQL("id")
        in_evidence = sql.SQL("{} AND id IN (SELECT drawer_id FROM evidence)").format(condition)
        near_evidence, p_evidence = search.nearest_sql(
            col.partition,
            cols,
            in_evidence,
            cparams,
            n if mode == "restrict" else max(n, 4 * n),
            dim,
            filtered=True,
            gate=search.Gate(sql.SQL("SELECT count(*) AS n FROM evidence"), {}),
        )
        if mode == "restrict":
            return sql.SQL("SELECT id, distance, true AS evidence FROM ({}) AS e").format(
                near_evidence
            ), p_evidence
        near_all, p_all = search.nearest_sql(
            col.partition,
            cols,
            condition,
            cparams,
            max(n, 4 * n),
            dim,
            filtered=bool(keys),
            gate=search.wing_room_gate(col.partition, keys),
        )
        ranked = sql.SQL(
            "SELECT id, min(distance) AS distance, bool_or(evidence) AS evidence FROM ("
            " SELECT id, distance, true AS evidence FROM ({}) AS e UNION ALL"
            " SELECT id, distance, id IN (SELECT drawer_id FROM evidence) FROM ({}) AS a) AS u GROUP BY id"
        ).format(near_evidence, near_all)
        return ranked, {**p_evidence, **p_all}

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
        if direction not in ("outgoing", "incoming", "both"):
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
            if direction in ("outgoing", "both"):
                arms.append(
                    sql.SQL(
                        "SELECT 'outgoing' AS direction, f.* FROM {fact} f WHERE f.start_id IN (SELECT id "
                        "FROM v)"
                    ).format(fact=self._fact)
                )
            if direction in ("incoming", "both"):
                arms.append(
                    sql.SQL(
                        "SELECT 'incoming' AS direction, f.* FROM {fact} f WHERE f.end_id IN (SELECT id "
                        "FROM v)"
                    ).format(fact=self._fact)
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
        facts = _load(row[1])
        for fact in facts:
            fact["evidence"] = _evidence(fact)
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
        keys = _keys(wing, room)
        values = {"as_of": self._as_of(as_of)}
        values["q"], dim = self._vector(col, query_embedding)

        def build():
            where = self._where(wing, room)
            condition, cparams = col.partition.condition(where)
            near, p_near = search.nearest_sql(
                col.partition,
                sql.SQL("id"),
                condition,
                cparams,
                max(1, int(drawers)),
                dim,
                filtered=bool(keys),
                gate=search.wing_room_gate(col.partition, keys),
            )
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
        return _load(row[0])

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
    ) -> list[dict]:
        """Vector and full-text rankings fused by reciprocal rank fusion, in one statement.

        Each ranking contributes its best ``max(candidates, 4 x n_results)`` drawers (full text: the
        backend's ``lexical_search`` ranking, rare words weigh more); a drawer's score is
        ``sum(1 / (k + rank))`` over the rankings it appears in; equal scores go to the better vector
        rank (then the id), so the order does not depend on how ids happen to sort. Each result:
        ``{"id", "document", "metadata", "score", "vector_rank", "text_rank", "distance", "text_score"}``,
        best first.
        """
        col = self.drawers()
        n = clamped_row_count(n_results)
        if col is None or n == 0:
            return []
        keys = _keys(wing, room)
        depth = max(int(candidates), 4 * n)
        values = {"text": checked_text(query_text, "query_text") or ""}
        values["q"], dim = self._vector(col, query_embedding)

        def build():
            where = self._where(wing, room)
            condition, cparams = col.partition.condition(where)
            near, p_near = search.nearest_sql(
                col.partition,
                sql.SQL("id"),
                condition,
                cparams,
                depth,
                dim,
                filtered=bool(keys),
                gate=search.wing_room_gate(col.partition, keys),
            )
            lexical, p_lex = search.lexical_sql(col.partition, condition, cparams, depth, rows=False)
            query = sql.SQL(
                "WITH vec AS MATERIALIZED (SELECT id, distance, row_number() OVER (ORDER BY distance, id) "
                "AS rank"
                "  FROM ({near}) AS v),"
                " lex AS MATERIALIZED (SELECT id, score, row_number() OVER (ORDER BY score DESC, id) AS rank"
                "  FROM ({lexical}) AS l WHERE score > 0),"
                # an exact tie (ranks 1 and 2 crossed) goes to the nearer vector, not to the id
                " fused AS (SELECT id, sum(1.0 / (%(rrf_k)s + rank))::float8 AS score, min(vrank) AS vrank"
                "  FROM (SELECT id, rank, rank AS vrank FROM vec"
                "   UNION ALL SELECT id, rank, NULL FROM lex) AS u"
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
            self._cache.get(("hybrid", n, depth, int(k), tuple(keys.items()), col.partition.layout()), build),
            **values,
        )
        return _load(row[0])


def _keys(wing: Optional[str], room: Optional[str]) -> dict:
    """The wing/room equalities of a filter (validated text)."""
    return {k: checked_text(v, k) for k, v in (("wing", wing), ("room", room)) if v is not None}


def _load(value: Any) -> Any:
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def _evidence(fact: dict) -> Optional[str]:
    if fact.get("source_drawer_id") is None:
        return None
    if fact.get("drawer_found"):
        return "refiled" if fact.get("source_drawer_deleted_at") else "present"
    return "deleted" if fact.get("source_drawer_deleted_at") else "missing"


__all__ = ["PalaceSearch", "embed_query", "RRF_K"]
