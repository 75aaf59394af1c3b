"""A MemPalace collection (drawers, closets or assets of one palace) stored in PostgreSQL: MemPalace's
``BaseCollection`` API over a :class:`~mempalace_pg.store.partition.Partition`.

Each collection's records live in their own partition of ``<schema>.records`` (``records_c<pk>``)
with its vector index as HNSW segments over rows already written (the newest rows are searched
exactly until a folder builds them a segment, see :mod:`mempalace_pg.engine.indexing`). Every
operation is one SQL statement on one pooled connection, filters are compiled to SQL (see
:mod:`mempalace_pg.store.filters`), search statements are built in :mod:`mempalace_pg.store.search`,
and every value travels as a bound parameter, vectors in binary.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Optional

import psycopg
from mempalace.backends.base import (
    BackendClosedError,
    BaseCollection,
    DimensionMismatchError,
    GetResult,
    LexicalHit,
    LexicalResult,
    PalaceRef,
    QueryResult,
    _IncludeSpec,  # noqa: PLC2701 - MemPalace's own parser of include=, so ours cannot drift from it
)
from psycopg import sql
from psycopg.types.json import Jsonb

from mempalace_pg.config import Settings
from mempalace_pg.db.sqlkit import StatementCache, clamped_row_count
from mempalace_pg.engine import backlog, nearest
from mempalace_pg.store import chroma_lexical, search
from mempalace_pg.store.filters import INDEX_PREFIX, wing_room_equalities
from mempalace_pg.store.partition import COPY_THRESHOLD, DRAWERS_COLLECTION, Partition
from mempalace_pg.store.records import (
    as_matrix,
    clean_batch,
    clean_document,
    clean_id,
    clean_lookup_ids,
    clean_metadata,
)
from mempalace_pg.store.upkeep import CollectionUpkeep
from mempalace_pg.text import storable

if TYPE_CHECKING:
    from mempalace.backends.base import BaseBackend

    from mempalace_pg.db.pool import Database
    from mempalace_pg.store.bulk import BulkLoader

#: Every collection MemPalace keeps in a palace.
COLLECTIONS = (DRAWERS_COLLECTION, "mempalace_closets", "mempalace_assets")


class PostgresCollection(CollectionUpkeep, BaseCollection):
    """One collection of one palace. Obtain it from :meth:`PostgresBackend.get_collection`."""

    upsert_merges_metadata = False

    def __init__(
        self,
        *,
        backend: "BaseBackend",
        db: "Database",
        palace: PalaceRef,
        namespace: str,
        name: str,
        collection_pk: int,
        dimension: Optional[int],
        read_only: bool = False,
    ):
        self._backend = backend  # MemPalace reads capabilities through this attribute
        self._db = db
        self._palace = palace
        self.name = name
        #: The storage under this collection (shared with bulk loads, units of work and retrieval).
        self.partition = Partition(db, collection_pk, name, dimension=dimension, read_only=read_only)
        self._closed = False
        self._statements = StatementCache()  # query()'s statements by filter and shape

    def __repr__(self) -> str:
        return f"<PostgresCollection {self.name} of {self._palace.id!r} ({self.partition.table_name})>"

    @property
    def backend(self) -> "BaseBackend":
        """The backend that opened this collection (it owns the collection's lifetime)."""
        return self._backend

    @property
    def palace(self) -> PalaceRef:
        """The palace this collection belongs to."""
        return self._palace

    @property
    def settings(self) -> Settings:
        """The settings this collection was opened with (its siblings are opened with the same)."""
        return self._db.settings

    # -- helpers ------------------------------------------------------------------------------
    def database(self) -> "Database":
        """The database this collection lives in; raises BackendClosedError once it (or its backend) is
        closed."""
        if self._closed or self._backend.closed:
            raise BackendClosedError(f"collection {self.name!r} has been closed")
        return self._db

    @property
    def distance_metric(self) -> str:
        return "cosine"

    @property
    def dimension(self) -> Optional[int]:
        """The vector width of this collection, or None before its first write."""
        return self.partition.dimension

    def bulk_load(self) -> "BulkLoader":
        """Load many records fast: ``with col.bulk_load() as load: load(ids=..., ...)``.

        Binary COPY per batch, batches written by background connections while the caller prepares
        the next, the HNSW index built once at the end. See :mod:`mempalace_pg.store.bulk`.
        """
        from mempalace_pg.store.bulk import BulkLoader

        return BulkLoader(self, self.partition, self.database())

    # -- writes ---------------------------------------------------------------------------------
    def _write(self, ids, documents, metadatas, embeddings, *, replace: bool) -> None:
        db = self.database()
        self.partition.check_writable()
        if not len(ids):
            return
        batch = clean_batch(ids, documents, metadatas, embeddings)
        ids, documents, metas, matrix = batch.ids, batch.documents, batch.metadatas, batch.matrix
        dim = batch.dimension
        self.partition.check_dimension(dim)  # a known width is checked before any I/O

        def work(conn: psycopg.Connection) -> int:
            stored = self.partition.claim_width(conn, dim)
            self.partition.write_rows(conn, ids, documents, metas, matrix, replace=replace)
            return stored

        # A batch that is one INSERT into a collection of known width needs no explicit transaction
        # (autocommit makes the statement atomic): one round trip instead of three.
        single = self.partition.dimension is not None and len(ids) < COPY_THRESHOLD
        try:
            self.partition.dimension = db.run(work, atomic=not single)
        except psycopg.errors.UniqueViolation:
            existing = self.get(ids=ids, include=[]).ids
            raise ValueError(
                f"ids already exist in collection {self.name!r}: {existing[:10]}; "
                "nothing in this batch was written"
            ) from None
        backlog.after_write(self.partition.index, len(ids), dimension=self.partition.dimension)

    def add(self, *, documents, ids, metadatas=None, embeddings=None) -> None:
        """Insert new records; if any id already exists, nothing is written and ValueError is raised."""
        self._write(ids, documents, metadatas, embeddings, replace=False)

    def upsert(self, *, documents, ids, metadatas=None, embeddings=None) -> None:
        """Insert or replace records (metadata is replaced, not merged), atomically."""
        self._write(ids, documents, metadatas, embeddings, replace=True)

    def update(self, *, ids, documents=None, metadatas=None, embeddings=None) -> None:
        """Atomic update in one statement: documents/embeddings replaced, metadata merged; unknown ids
        skipped."""
        if documents is None and metadatas is None and embeddings is None:
            raise ValueError("update requires at least one of documents, metadatas, embeddings")
        db = self.database()
        self.partition.check_writable()
        ids = list(ids)
        n = len(ids)
        for label, value in (("documents", documents), ("metadatas", metadatas), ("embeddings", embeddings)):
            if value is not None and len(value) != n:
                raise ValueError(f"{label} length {len(value)} does not match ids length {n}")
        if not n:
            return
        raw_ids = ids
        ids = [clean_id(rid) for rid in raw_ids]
        if documents is not None:
            documents = [clean_document(doc, rid) for rid, doc in zip(raw_ids, documents)]
        metas = None
        if metadatas is not None:
            metas = [Jsonb(clean_metadata(meta, rid)) for rid, meta in zip(raw_ids, metadatas)]
        vectors = None
        if embeddings is not None:
            matrix = as_matrix(embeddings, raw_ids)
            dim = int(matrix.shape[1])
            self.partition.check_dimension(dim)
            vectors = list(matrix)

        query = sql.SQL(
            "UPDATE {t} AS r SET "
            "document = CASE WHEN %(has_docs)s THEN u.document ELSE r.document END, "
            "metadata = CASE WHEN %(has_metas)s THEN r.metadata || u.metadata ELSE r.metadata END, "
            "embedding = CASE WHEN %(has_vecs)s THEN u.embedding ELSE r.embedding END, "
            "written_at = now(), vector_seq = DEFAULT "
            "FROM unnest(%(ids)s::text[], %(docs)s::text[], %(metas)s::jsonb[], %(vecs)b::vector[]) "
            "AS u(id, document, metadata, embedding) "
            "WHERE r.collection_pk = %(pk)s AND r.id = u.id"
        ).format(t=self.partition.table)
        params = {
            "has_docs": documents is not None,
            "has_metas": metas is not None,
            "has_vecs": vectors is not None,
            "ids": ids,
            "docs": list(documents) if documents is not None else [None] * n,
            "metas": metas if metas is not None else [None] * n,
            "vecs": vectors if vectors is not None else [None] * n,
            "pk": self.partition.pk,
        }
        updated = db.run(lambda conn: conn.execute(query, params).rowcount)
        if updated:
            backlog.after_write(self.partition.index, updated, dimension=self.partition.dimension)

    def delete(self, *, ids=None, where=None) -> None:
        """Delete the given ids and/or the records matching ``where`` (both: the intersection)."""
        db = self.database()
        self.partition.check_writable()
        statement = self.partition.delete_sql(ids=ids, where=where)
        if statement is not None:
            db.run(lambda conn: conn.execute(*statement))

    # -- reads ----------------------------------------------------------------------------------
    def count(self) -> int:
        """Number of records, from the trigger-maintained facet_counts (no scan of the records)."""
        db = self.database()
        query = sql.SQL("SELECT COALESCE(sum(n), 0)::bigint FROM {} WHERE collection_pk = %(pk)s").format(
            db.ident("facet_counts")
        )
        return int(db.run(lambda conn: conn.execute(query, {"pk": self.partition.pk}).fetchone()[0]))

    def _columns(self, spec: _IncludeSpec) -> tuple[sql.Composable, list[str]]:
        names = ["id"]
        if spec.documents:
            names.append("document")
        if spec.metadatas:
            names.append("metadata")
        if spec.embeddings:
            names.append("embedding")
        return sql.SQL(", ").join(sql.Identifier(n) for n in names), names

    @staticmethod
    def _to_result(rows: list, names: list[str], spec: _IncludeSpec) -> GetResult:
        pos = {n: i for i, n in enumerate(names)}
        return GetResult(
            ids=[r[0] for r in rows],
            documents=[r[pos["document"]] for r in rows] if spec.documents else [],
            metadatas=[r[pos["metadata"]] for r in rows] if spec.metadatas else [],
            embeddings=[_vector_list(r[pos["embedding"]]) for r in rows] if spec.embeddings else None,
        )

    def get(
        self, *, ids=None, where=None, where_document=None, limit=None, offset=None, include=None
    ) -> GetResult:
        db = self.database()
        spec = _IncludeSpec.resolve(include, default_distances=False)
        condition, params = self.partition.condition(where, where_document)
        columns, names = self._columns(spec)
        parts = [condition]
        if ids is not None:
            ids = clean_lookup_ids(ids)
            if not ids:
                return GetResult(
                    ids=[], documents=[], metadatas=[], embeddings=[] if spec.embeddings else None
                )
            parts.append(sql.SQL("id = ANY(%(ids)s::text[])"))
            params = {**params, "ids": ids}
        # Filing order, as Chroma returns records (a record keeps its place when updated); the
        # records_filing_order index serves pages of it.
        query = sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY seq").format(
            columns, self.partition.table, sql.SQL(" AND ").join(parts)
        )
        if limit is not None:
            query += sql.SQL(" LIMIT %(limit)s")
            params = {**params, "limit": max(0, int(limit))}
        if offset:
            query += sql.SQL(" OFFSET %(offset)s")
            params = {**params, "offset": max(0, int(offset))}
        rows = db.run(lambda conn: conn.execute(query, params).fetchall())
        return self._to_result(rows, names, spec)

    def get_all_rows(self, where=None, include=None) -> GetResult:
        """Every matching record in one statement (no paging, no rescans)."""
        include = list(include) if include else ["metadatas"]
        return self.get(where=where, include=include)

    def get_all_metadata(self, where=None) -> list[dict]:
        db = self.database()
        condition, params = self.partition.condition(where)
        # Binary COPY streams jsonb as raw JSON text (a version byte, then the text: no escaping), and
        # parsing it a few thousand rows at a time as one JSON array is several times faster than a
        # driver-built dict per row, while the server keeps streaming.
        # In filing order, as Chroma gives them (MemPalace's status lists ties in that order).
        query = sql.SQL(
            "COPY (SELECT metadata FROM {} WHERE {} ORDER BY seq) TO STDOUT (FORMAT BINARY)"
        ).format(self.partition.table, condition)

        def work(conn):
            out: list = []
            chunk: list = []
            with conn.cursor().copy(query, params) as copy:
                copy.set_types(["bytea"])
                for (raw,) in copy.rows():
                    chunk.append(raw[1:])
                    if len(chunk) >= 5000:
                        out.extend(json.loads(b"[" + b",".join(chunk) + b"]"))
                        chunk = []
            if chunk:
                out.extend(json.loads(b"[" + b",".join(chunk) + b"]"))
            return out

        return db.run(work)

    def get_recent(self, *, limit, where=None, order_field="filed_at", include=None) -> GetResult:
        """The newest ``limit`` records by the ISO-8601 text in ``order_field``, ordered in SQL.

        Same order as MemPalace's ``recency_sort_key``: non-empty string values descending by
        code point, then records without one, ties in filing order. For ``filed_at`` an index serves
        the order.
        """
        db = self.database()
        order_field = storable(order_field) if isinstance(order_field, str) else order_field
        if limit is None or int(limit) <= 0:
            return GetResult.empty()
        spec = _IncludeSpec.resolve(
            ["documents", "metadatas"] if include is None else include, default_distances=False
        )
        condition, params = self.partition.condition(where)
        columns, names = self._columns(spec)
        if order_field == "filed_at":
            # the records_filed_at index holds filed_at's first characters; ties go to the whole value
            key = sql.SQL('left(filed_at, {}) COLLATE "C" DESC NULLS LAST, filed_at COLLATE "C" DESC').format(
                sql.Literal(INDEX_PREFIX["filed_at"])
            )
            order_params: dict = {}
        else:
            key = sql.SQL(
                "(CASE WHEN jsonb_typeof(metadata -> %(order_field)s) = 'string' THEN metadata ->> "
                "%(order_field)s END) "
                'COLLATE "C" DESC NULLS LAST'
            )
            order_params = {"order_field": order_field}
        query = sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY {}, seq LIMIT %(limit)s").format(
            columns, self.partition.table, condition, key
        )
        rows = db.run(
            lambda conn: conn.execute(query, {**params, **order_params, "limit": int(limit)}).fetchall()
        )
        return self._to_result(rows, names, spec)

    def facet_counts(self, field: str, where=None, limit: int = 1000) -> dict[str, int]:
        """Count of records per value of a metadata field (records without it are not counted)."""
        db = self.database()
        field = storable(field) if isinstance(field, str) else field
        fast = self._facet_fast_path(field, where)
        if fast is not None:
            key_filter, fparams = fast
            query = sql.SQL(
                "SELECT k, sum(n) FROM (SELECT {f} #>> '{{}}' AS k, n FROM {t} WHERE collection_pk = %(pk)s "
                "{w}) s "
                "WHERE k IS NOT NULL GROUP BY k HAVING sum(n) > 0 ORDER BY 2 DESC, 1 LIMIT %(limit)s"
            ).format(f=sql.Identifier(field), t=db.ident("facet_counts"), w=key_filter)
            rows = db.run(
                lambda conn: conn.execute(
                    query, {"pk": self.partition.pk, **fparams, "limit": int(limit)}
                ).fetchall()
            )
            return {str(k): int(c) for k, c in rows}
        condition, params = self.partition.condition(where)
        if field in ("wing", "room", "source_file", "filed_at"):
            # The string-only columns miss non-string values: fall back to the JSON text for those.
            value = sql.SQL("COALESCE({}, metadata ->> %(field)s)").format(sql.Identifier(field))
        else:
            value = sql.SQL("metadata ->> %(field)s")
        query = sql.SQL(
            "SELECT k, count(*) FROM (SELECT {v} AS k FROM {t} WHERE {c}) AS s WHERE k IS NOT NULL "
            "GROUP BY k ORDER BY 2 DESC, 1 LIMIT %(limit)s"
        ).format(v=value, t=self.partition.table, c=condition)
        rows = db.run(
            lambda conn: conn.execute(query, {**params, "field": field, "limit": int(limit)}).fetchall()
        )
        return {str(k): int(c) for k, c in rows}

    def _facet_fast_path(self, field: str, where) -> Optional[tuple[sql.Composable, list]]:
        """facet_counts answered from the counts table: wing or room, with no filter or a filter of
        wing/room string equalities (what MemPalace's status, list_wings, list_rooms and taxonomy ask)."""
        if field not in ("wing", "room"):
            return None
        keys = wing_room_equalities(where)
        return None if keys is None else nearest.facet_key_filter(keys)

    # Long because MemPalace's query() checks and shapes its arguments before the one statement runs.
    def query(
        self,
        *,
        query_texts=None,
        query_embeddings=None,
        n_results=10,
        where=None,
        where_document=None,
        include=None,
    ) -> QueryResult:
        """Nearest records by cosine distance (lower is closer), filters applied in SQL.

        Uses the collection's HNSW index with iterative scans, so a filtered query still returns
        ``n_results`` rows when that many match.
        """
        db = self.database()
        if query_texts is not None and query_embeddings is None:
            raise ValueError("the postgres backend needs query_embeddings (MemPalace embeds queries itself)")
        if query_embeddings is None or len(query_embeddings) == 0:
            raise ValueError("query requires a non-empty list of query_embeddings")
        spec = _IncludeSpec.resolve(include)
        condition, fparams = self.partition.condition(where, where_document)
        queries = as_matrix(query_embeddings, list(range(len(query_embeddings))), what="query embedding")
        n = clamped_row_count(n_results)
        dim = self.partition.known_dimension()
        if dim is None or n == 0:
            # Nothing was ever written (or nothing asked for): an empty answer of the right shape.
            return QueryResult.empty(len(queries), embeddings_requested=spec.embeddings)
        if queries.shape[1] != dim:
            raise DimensionMismatchError(
                f"query embeddings have {queries.shape[1]} dimensions; collection {self.name!r} holds {dim}"
            )
        columns, names = self._columns(spec)
        out: dict[str, list] = {
            "ids": [],
            "documents": [],
            "metadatas": [],
            "distances": [],
            "embeddings": [],
        }
        entry = self._nearest(where, where_document, spec, n, dim, columns, condition, fparams)

        def work(conn: psycopg.Connection) -> None:
            for q in queries:
                rows = entry.execute(conn, {"q": q}).fetchall()
                res = self._to_result(rows, names, spec)
                out["ids"].append(res.ids)
                out["documents"].append(res.documents)
                out["metadatas"].append(res.metadatas)
                out["distances"].append([_distance(r[-1]) for r in rows] if spec.distances else [])
                out["embeddings"].append(res.embeddings)

        db.run(work)
        return QueryResult(
            ids=out["ids"],
            documents=out["documents"],
            metadatas=out["metadatas"],
            distances=out["distances"],
            embeddings=out["embeddings"] if spec.embeddings else None,
        )

    def _nearest(self, where, where_document, spec, n, dim, columns, condition, fparams):
        return nearest.nearest_statement(
            self.partition.index,
            self._statements,
            key=search.query_key(where, where_document, spec, n, dim),
            columns=columns,
            condition=condition,
            params=fparams,
            n=n,
            dim=dim,
            filtered=bool(where or where_document),
            gate_keys=wing_room_equalities(where) if not where_document else None,
        )

    def explain_query(self, *, query_embedding, n_results=10, where=None, where_document=None) -> dict:
        """How PostgreSQL runs :meth:`query` for one ``query_embedding``: the statement query() runs, with
        the same search breadth, under EXPLAIN (ANALYZE, BUFFERS); the plan in PostgreSQL's JSON format
        ("Plan", "Execution Time", ...). Each index segment is a CTE ``segment_<i>``, the rows no segment
        holds yet are ``tail``, a small filter's exact scan ``exact``. For finding where a slow query
        spends its time; it runs the query once more."""
        spec = _IncludeSpec.resolve(None)
        condition, fparams = self.partition.condition(where, where_document)
        [q] = as_matrix([query_embedding], [0], what="query embedding")
        dim = self.partition.known_dimension()
        if dim is None:
            raise ValueError(f"{self.name!r} holds no record yet: there is no query to explain")
        if len(q) != dim:
            raise DimensionMismatchError(
                f"the query embedding has {len(q)} dimensions; {self.name!r} holds {dim}"
            )
        columns, _ = self._columns(spec)
        entry = self._nearest(
            where, where_document, spec, clamped_row_count(n_results), dim, columns, condition, fparams
        )
        return self.database().run(lambda conn: entry.explain(conn, {"q": q}))

    def lexical_search(self, *, query: str, n_results: int = 10, where=None) -> LexicalResult:
        """Full-text search in SQL, scored by BM25 as SQLite FTS5's bm25() scores.

        Words are runs of letters and numbers (everything else separates them, as in SQLite FTS5),
        lower-cased; any query word of 2+ characters matches (as MemPalace's BM25 counts words).
        Candidates come from the GIN-indexed tsvector: all documents of a rare word, a bounded sample
        for a common one; each is scored from the query words' counts in it, its length against the
        collection's average, and each word's document frequency (counted through the index up to a
        cap, past it as ANALYZE recorded it). One statement; filters apply in SQL.
        """
        db = self.database()
        query = storable(query) if isinstance(query, str) else ""
        if not query.strip() or int(n_results) <= 0:
            return LexicalResult(hits=[])
        condition, params = self.partition.condition(where)
        if self.settings.lexical == "chroma":
            return self._lexical_as_chroma(query, int(n_results), condition, params, filtered=bool(where))
        gate = nearest.wing_room_gate(self.partition.index, wing_room_equalities(where))
        stmt, args = search.lexical_sql(self.partition, condition, params, int(n_results), gate=gate)
        rows = db.run(lambda conn: conn.execute(stmt, {**args, "text": query}).fetchall())
        return LexicalResult(
            hits=[
                LexicalHit(id=r[0], document=r[1], metadata=r[2], score=float(r[3]))
                for r in rows
                if r[3] and r[3] > 0
            ]
        )

    def _lexical_as_chroma(
        self, query: str, n_results: int, condition: sql.Composable, params: dict, *, filtered: bool
    ) -> LexicalResult:
        """lexical_search as MemPalace's Chroma backend ranks (:mod:`~mempalace_pg.store.chroma_lexical`)."""
        stmt, args = chroma_lexical.candidates_sql(self.partition, condition, params, query, filtered)
        rows = self.database().run(lambda conn: conn.execute(stmt, args).fetchall())
        return LexicalResult(
            hits=[
                LexicalHit(id=i, document=doc, metadata=meta, score=float(score))
                for i, doc, meta, score in chroma_lexical.ranked(query, rows, n_results)
            ]
        )

    def close(self) -> None:
        self._closed = True


def _distance(value: Any) -> float:
    d = float(value)
    return 1.0 if math.isnan(d) else d  # a zero vector has no direction: neither close nor far


def _vector_list(value: Any) -> list[float]:
    """A stored vector as a list of Python floats (the pgvector adapter returns a Vector or ndarray)."""
    if hasattr(value, "to_list"):
        return value.to_list()
    return [float(x) for x in value]


__all__ = [
    "COLLECTIONS",
    "PostgresCollection",
]
