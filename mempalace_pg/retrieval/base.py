"""What every retrieval of :class:`~mempalace_pg.retrieval.PalaceSearch` shares: the palace's graph and
drawers, the statement cache, the graph walk and the checks of a call's arguments."""

from __future__ import annotations

import json
from typing import Any, Optional, Sequence

from mempalace.backends.base import CollectionNotInitializedError
from psycopg import sql

from mempalace_pg.config import Settings
from mempalace_pg.db.sqlkit import Kept, StatementCache
from mempalace_pg.engine import nearest
from mempalace_pg.graph.kg import AgeKnowledgeGraph
from mempalace_pg.graph.values import checked_text, mempalace_helpers, start_key
from mempalace_pg.store.collection import PostgresCollection
from mempalace_pg.store.records import as_matrix

#: Hops allowed in a neighbourhood: 1..MAX_HOPS.
MAX_HOPS = 6


class SearchBase:
    """The state and helpers the retrievals share (see :class:`~mempalace_pg.retrieval.PalaceSearch`)."""

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
            from mempalace.backends.base import DimensionMismatchError

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
        clauses = [{k: v} for k, v in wing_room_keys(wing, room).items()]
        return None if not clauses else clauses[0] if len(clauses) == 1 else {"$and": clauses}

    @staticmethod
    def _nearest_ids(
        col: PostgresCollection, condition: sql.Composable, params: dict, keys: dict, n: int, dim: int
    ) -> tuple[sql.Composable, dict]:
        """The ids of the ``n`` drawers nearest to ``%(q)s`` that meet ``condition`` (a wing/room filter,
        whose equalities are ``keys``), with their distance: the backend's own search statement, as a
        subquery of a retrieval."""
        return nearest.nearest_sql(
            col.partition.index,
            columns=sql.SQL("id"),
            condition=condition,
            params=params,
            n=n,
            dim=dim,
            filtered=bool(keys),
            gate=nearest.wing_room_gate(col.partition.index, keys),
        )

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
    def neighbourhood_ctes(self, palace: int, hops: int) -> tuple[sql.Composable, dict]:
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


def wing_room_keys(wing: Optional[str], room: Optional[str]) -> dict:
    """The wing/room equalities of a filter (validated text)."""
    return {k: checked_text(v, k) for k, v in (("wing", wing), ("room", room)) if v is not None}


def loaded_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def evidence_state(fact: dict) -> Optional[str]:
    if fact.get("source_drawer_id") is None:
        return None
    if fact.get("drawer_found"):
        return "refiled" if fact.get("source_drawer_deleted_at") else "present"
    return "deleted" if fact.get("source_drawer_deleted_at") else "missing"


__all__ = ["SearchBase", "MAX_HOPS", "wing_room_keys", "loaded_json", "evidence_state"]
