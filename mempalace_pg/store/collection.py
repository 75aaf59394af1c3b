"""A MemPalace collection (drawers, closets or assets of one palace) stored in PostgreSQL.

Each collection's records live in their own partition of ``<schema>.records`` (``records_c<pk>``)
with its vector index as HNSW segments over rows already written (the newest rows are searched
exactly until a folder builds them a segment, see :mod:`mempalace_pg.store.indexing`). Every operation is one SQL statement on one pooled
connection, filters are compiled to SQL (see :mod:`mempalace_pg.store.filters`), and every value travels
as a bound parameter, vectors in binary.
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import psycopg
from mempalace.backends.base import (
    BackendClosedError,
    BaseCollection,
    DimensionMismatchError,
    EmbedderIdentity,
    GetResult,
    HealthStatus,
    LexicalHit,
    LexicalResult,
    MaintenanceResult,
    PalaceRef,
    QueryResult,
    UnsupportedMaintenanceKindError,
    _IncludeSpec,
)
from psycopg import sql
from psycopg.types.json import Jsonb

from mempalace_pg.store import indexing
from mempalace_pg.db.sqlkit import (
    MAX_ROW_COUNT,
    QUERY_VECTOR,
    StatementCache,
    clamped_row_count,
    fill,
    row_count,
)
from mempalace_pg.store.filters import INDEX_PREFIX, compile_filters, wing_room_equalities
from mempalace_pg.store.records import as_matrix, clean_batch, clean_document, clean_id, clean_lookup_ids, clean_metadata
from mempalace_pg.text import storable

if TYPE_CHECKING:
    from mempalace_pg.store.backend import PostgresBackend
    from mempalace_pg.store.bulk import BulkLoader
    from mempalace_pg.db.pool import Database

#: The collection whose records are drawers (facts name them as their source_drawer_id).
DRAWERS_COLLECTION = "mempalace_drawers"
#: Every collection MemPalace keeps in a palace.
COLLECTIONS = (DRAWERS_COLLECTION, "mempalace_closets", "mempalace_assets")


def existing_collections(backend, palace, options: Optional[dict] = None) -> dict:
    """``{name: collection}`` of the MemPalace collections ``palace`` already has in ``backend`` (any
    MemPalace backend), opened without creating any."""
    from mempalace.backends import CollectionNotInitializedError

    out = {}
    for name in COLLECTIONS:
        try:
            out[name] = backend.get_collection(palace=palace, collection_name=name, create=False, options=options)
        except CollectionNotInitializedError:
            continue
    return out


#: Batches at least this large go through COPY into a staging table instead of one INSERT.
COPY_THRESHOLD = 2000


#: A filtered query takes this many times n_results candidates from the index before re-ranking: the
#: iterative scan returns batches out of order, and a few more candidates put the best ones back in.
#: With 2, a wing query (12.5k of 100k drawers) returns its 10 rows at recall@10 0.96-0.98 in the backend
#: benchmark (benchmarks/RESULTS.md); each further multiple makes the iterative scan walk further.
FILTERED_OVERSAMPLE = 2
#: A query whose filter matches at most this many records is answered by an exact scan.
EXACT_SCAN_MAX = 3000
#: Lexical search: a word in at least LEXICAL_DF_CAP documents is common: its documents are not
#: counted further, and LEXICAL_CANDIDATES of them (or 4 x n_results) are sampled as candidates; every
#: document of a rarer word is scored. With 100, on Zipf-distributed words (benchmarks/bench_lexical.py,
#: 20k documents), the top 10 of 2-3 word queries shared 23% with exact BM25's; with 500, 89%, at 4.4 ms
#: p50 against 1.7 (RESULTS.md, 18:20-18:21 UTC; 0.90 at 4.0 ms at 19:45 UTC, once candidates were scored
#: from their own index scan); tests/test_contract.py checks the agreement.
LEXICAL_DF_CAP = 500
LEXICAL_CANDIDATES = 50


class PostgresCollection(BaseCollection):
    """One collection of one palace. Obtain it from :meth:`PostgresBackend.get_collection`."""

    upsert_merges_metadata = False

    def __init__(self, *, backend: "PostgresBackend", db: "Database", palace: PalaceRef,
                 namespace: str, name: str, collection_pk: int, dimension: Optional[int],
                 read_only: bool = False):
        self._backend = backend  # MemPalace reads capabilities through this attribute
        self._db = db
        self._palace = palace
        self._namespace = namespace
        self.name = name
        self._pk = collection_pk
        self._dimension = dimension
        self._read_only = read_only
        self._closed = False
        self._table = db.ident(f"records_c{collection_pk}")
        self._relname = f"{db.schema}.records_c{collection_pk}"  # for ::regclass and advisory-lock keys
        self._statements = StatementCache()  # query()'s statements by filter and shape

    def __repr__(self) -> str:
        return f"<PostgresCollection {self.name} of {self._palace.id!r} (records_c{self._pk})>"

    # -- helpers ------------------------------------------------------------------------------
    def _open(self) -> "Database":
        if self._closed or self._backend._closed:
            raise BackendClosedError(f"collection {self.name!r} has been closed")
        return self._db

    def _filters(self, where=None, where_document=None) -> tuple[sql.Composable, list]:
        """The SQL condition for a MemPalace filter on this collection, and its parameters.

        It always names the partition key too, so the primary key (collection_pk, id) serves id lookups.
        """
        condition, params = compile_filters(where, where_document)
        return sql.SQL("collection_pk = {} AND {}").format(sql.Literal(self._pk), condition), params

    @property
    def distance_metric(self) -> str:
        return "cosine"

    @property
    def dimension(self) -> Optional[int]:
        """The vector width of this collection, or None before its first write."""
        return self._dimension

    def _fetch_dimension(self) -> Optional[int]:
        """The width another process may have fixed since this handle was opened."""
        query = sql.SQL("SELECT dimension FROM {} WHERE collection_pk = %s").format(self._db.ident("collections"))
        row = self._db.run(lambda conn: conn.execute(query, (self._pk,)).fetchone())
        self._dimension = row[0] if row else None
        return self._dimension

    def fresh_count(self) -> int:
        """Rows not in a vector index segment yet (searched exactly until the folder builds them one)."""
        top = indexing.layout(self, fresh=True).top
        query = sql.SQL("SELECT count(*) FROM {} WHERE vector_seq > %s").format(self._table)
        return int(self._db.run(lambda conn: conn.execute(query, (top,)).fetchone()[0]))

    def vector_layout(self) -> indexing.Layout:
        """The collection's vector index segments as this process last read them (statements depend on it)."""
        return indexing.layout(self)

    def _vector_type(self, dim: int) -> sql.Composable:
        return sql.SQL("vector({})").format(sql.Literal(int(dim)))

    def _half_type(self, dim: int) -> sql.Composable:
        return sql.SQL("halfvec({})").format(sql.Literal(int(dim)))

    def _claim_dimension(self, conn: psycopg.Connection, dim: int) -> int:
        """Fix the collection's width at its first write; return the width.

        The row lock taken by the UPDATE serializes concurrent first writers of one collection.
        """
        stored = conn.execute(
            sql.SQL("UPDATE {} SET dimension = COALESCE(dimension, %s) WHERE collection_pk = %s "
                    "RETURNING dimension").format(self._db.ident("collections")),
            (dim, self._pk),
        ).fetchone()[0]
        return stored

    def _width_for_write(self, conn: psycopg.Connection, dim: int) -> int:
        """The collection's width for a batch of ``dim``-wide vectors: the known one, or claimed now
        (first write); raises DimensionMismatchError when they differ."""
        stored = self._dimension or self._claim_dimension(conn, dim)
        self._check_dimension(stored, dim)
        return stored

    def _check_dimension(self, stored: Optional[int], dim: int) -> None:
        if stored is not None and stored != dim:
            raise DimensionMismatchError(
                f"collection {self.name!r} holds {stored}-dimension vectors; this batch has {dim}. "
                "Use the embedder the palace was built with (see `mempalace palace set-embedder`)."
            )

    def _build_vector_index(self, conn: psycopg.Connection, dim: int) -> None:
        """Make every row one vector index segment, built in one go (writes wait for it), then merge the
        GIN pending lists and refresh statistics. For bulk loads and ``reindex``.

        ``conn`` is a pooled (autocommit) connection: the build's session settings are reset afterwards.
        """
        indexing.build_session(conn)
        try:
            indexing.rebuild(conn, self._db.schema, self._pk, dim)
            indexing.forget(self)
            # Merge what the load left in the GIN indexes' pending lists (every search scans them).
            for name in self._gin_indexes(conn):
                conn.execute("SELECT gin_clean_pending_list(%s::regclass)", (f"{self._db.schema}.{name}",))
            # VACUUM as well as ANALYZE: a freshly loaded table otherwise draws autovacuum seconds later,
            # which then scans all of it while queries run. It costs little more than ANALYZE alone and
            # marks the pages all-visible.
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(self._table))
        finally:
            conn.execute("RESET maintenance_work_mem")
            conn.execute("RESET max_parallel_maintenance_workers")
            conn.execute("SELECT set_config('statement_timeout', %s, false)",
                         (str(self._db.settings.statement_timeout_ms),))

    def _gin_indexes(self, conn: psycopg.Connection) -> list[str]:
        """The names of this collection's GIN indexes (full text, metadata): its partition's own."""
        return [name for (name,) in conn.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = %s::regclass AND a.amname = 'gin' "
            "ORDER BY 1", (self._relname,))]

    def bulk_load(self) -> "BulkLoader":
        """Load many records fast: ``with col.bulk_load() as load: load(ids=..., ...)``.

        Binary COPY per batch, batches written by background connections while the caller prepares
        the next, the HNSW index built once at the end. See :mod:`mempalace_pg.store.bulk`.
        """
        from mempalace_pg.store.bulk import BulkLoader

        return BulkLoader(self)

    # -- writes ---------------------------------------------------------------------------------
    def _write(self, ids, documents, metadatas, embeddings, *, replace: bool) -> None:
        db = self._open()
        if self._read_only:
            raise PermissionError(f"collection {self.name!r} was opened read-only")
        if not len(ids):
            return
        batch = clean_batch(ids, documents, metadatas, embeddings)
        ids, documents, metas, matrix = batch.ids, batch.documents, batch.metadatas, batch.matrix
        dim = batch.dimension
        self._check_dimension(self._dimension, dim)  # a known width is checked before any I/O

        def work(conn: psycopg.Connection) -> int:
            stored = self._width_for_write(conn, dim)
            self.write_rows(conn, ids, documents, metas, matrix, replace=replace)
            return stored

        # A batch that is one INSERT into a collection of known width needs no explicit transaction
        # (autocommit makes the statement atomic): one round trip instead of three.
        single = self._dimension is not None and len(ids) < COPY_THRESHOLD
        try:
            self._dimension = db.run(work, atomic=not single)
        except psycopg.errors.UniqueViolation:
            existing = self.get(ids=ids, include=[]).ids
            raise ValueError(f"ids already exist in collection {self.name!r}: {existing[:10]}; "
                             "nothing in this batch was written") from None
        indexing.after_write(self)

    def write_rows(self, conn: psycopg.Connection, ids: list, documents: list, metas: list,
                   matrix: np.ndarray, *, replace: bool) -> None:
        """Write validated rows on ``conn``: one INSERT, or for large batches a COPY into a staging table
        and one INSERT from it (then ``conn`` must be in a transaction)."""
        # add: a plain INSERT, so an existing id fails the whole statement (UniqueViolation);
        # upsert: replace document, metadata and embedding in place.
        conflict = (
            sql.SQL("ON CONFLICT (collection_pk, {}(id)) DO UPDATE SET document = EXCLUDED.document, "
                    "metadata = EXCLUDED.metadata, embedding = EXCLUDED.embedding, written_at = now(), "
                    "vector_seq = DEFAULT").format(self._db.ident("text_key"))
            if replace else sql.SQL("")
        )
        n = len(ids)
        if n >= COPY_THRESHOLD:
            stage = sql.Identifier(f"mempalace_pg_stage_{self._pk}")
            conn.execute(sql.SQL(
                "CREATE TEMP TABLE IF NOT EXISTS {} (id text, document text, metadata jsonb, embedding vector) "
                "ON COMMIT DELETE ROWS").format(stage))
            self._copy_rows(conn, stage, ids, documents, metas, matrix, with_pk=False)
            source = sql.SQL("SELECT %s, id, document, metadata, embedding FROM {}").format(stage)
            params: tuple = (self._pk,)
        else:
            source = sql.SQL(
                "SELECT %s, u.id, u.document, u.metadata, u.embedding "
                "FROM unnest(%b::text[], %b::text[], %b::jsonb[], %b::vector[]) "
                "AS u(id, document, metadata, embedding)")
            params = (self._pk, ids, documents, [Jsonb(m) for m in metas], list(matrix))
        query = sql.SQL("INSERT INTO {} (collection_pk, id, document, metadata, embedding) {} {} "
                        ).format(self._table, source, conflict)
        conn.execute(query, params)

    def _copy_rows(self, conn, table, ids, documents, metas, matrix, *, with_pk: bool) -> None:
        """Binary COPY of validated rows into ``table``: the partition itself (bulk load) or a staging table."""
        cols = ("collection_pk, id, document, metadata, embedding" if with_pk
                else "id, document, metadata, embedding")
        types = (["int4"] if with_pk else []) + ["text", "text", "jsonb", "vector"]
        prefix = (self._pk,) if with_pk else ()
        with conn.cursor().copy(sql.SQL("COPY {} (" + cols + ") FROM STDIN WITH (FORMAT BINARY)").format(table)) as copy:
            copy.set_types(types)
            for i in range(len(ids)):
                copy.write_row(prefix + (ids[i], documents[i], Jsonb(metas[i]), matrix[i]))

    def add(self, *, documents, ids, metadatas=None, embeddings=None) -> None:
        """Insert new records; if any id already exists, nothing is written and ValueError is raised."""
        self._write(ids, documents, metadatas, embeddings, replace=False)

    def upsert(self, *, documents, ids, metadatas=None, embeddings=None) -> None:
        """Insert or replace records (metadata is replaced, not merged), atomically."""
        self._write(ids, documents, metadatas, embeddings, replace=True)

    def update(self, *, ids, documents=None, metadatas=None, embeddings=None) -> None:
        """Atomic update in one statement: documents/embeddings replaced, metadata merged; unknown ids skipped."""
        if documents is None and metadatas is None and embeddings is None:
            raise ValueError("update requires at least one of documents, metadatas, embeddings")
        db = self._open()
        if self._read_only:
            raise PermissionError(f"collection {self.name!r} was opened read-only")
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
            self._check_dimension(self._dimension, dim)
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
        ).format(t=self._table)
        params = {
            "has_docs": documents is not None,
            "has_metas": metas is not None,
            "has_vecs": vectors is not None,
            "ids": ids,
            "docs": list(documents) if documents is not None else [None] * n,
            "metas": metas if metas is not None else [None] * n,
            "vecs": vectors if vectors is not None else [None] * n,
            "pk": self._pk,
        }
        updated = db.run(lambda conn: conn.execute(query, params).rowcount)
        if updated:
            indexing.after_write(self)

    def delete(self, *, ids=None, where=None) -> None:
        """Delete the given ids and/or the records matching ``where`` (both: the intersection)."""
        db = self._open()
        if self._read_only:
            raise PermissionError(f"collection {self.name!r} was opened read-only")
        statement = self.delete_sql(ids=ids, where=where)
        if statement is not None:
            db.run(lambda conn: conn.execute(*statement))

    def delete_sql(self, *, ids=None, where=None) -> Optional[tuple[sql.Composable, list]]:
        """The one statement deleting these records (None when nothing is selected).

        For drawers it also stamps the facts drawn from them (source_drawer_deleted_at), in the same
        statement: see kg_mark_drawers_deleted in sql/0003_graph_and_drawers.sql."""
        condition, params = self._filters(where)
        if ids is None and not where:
            return None  # nothing selected: delete nothing (never the whole collection by accident)
        parts = [condition]
        if ids is not None:
            ids = clean_lookup_ids(ids)
            if not ids:
                return None
            parts.append(sql.SQL("id = ANY(%s::text[])"))
            params = params + [ids]
        query = sql.SQL("DELETE FROM {} WHERE {}").format(self._table, sql.SQL(" AND ").join(parts))
        if self.name == DRAWERS_COLLECTION:
            query = sql.SQL("WITH gone AS ({} RETURNING id) SELECT {}((SELECT palace_pk FROM {} "
                            "WHERE collection_pk = %s), array_agg(id)) FROM gone").format(
                query, self._db.ident("kg_mark_drawers_deleted"), self._db.ident("collections"))
            params = params + [self._pk]
        return query, params

    # -- reads ----------------------------------------------------------------------------------
    def count(self) -> int:
        """Number of records, from the trigger-maintained facet_counts (no scan of the records)."""
        db = self._open()
        query = sql.SQL("SELECT COALESCE(sum(n), 0)::bigint FROM {} WHERE collection_pk = %s").format(
            db.ident("facet_counts"))
        return int(db.run(lambda conn: conn.execute(query, (self._pk,)).fetchone()[0]))

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

    def get(self, *, ids=None, where=None, where_document=None, limit=None, offset=None,
            include=None) -> GetResult:
        db = self._open()
        spec = _IncludeSpec.resolve(include, default_distances=False)
        condition, params = self._filters(where, where_document)
        columns, names = self._columns(spec)
        parts = [condition]
        if ids is not None:
            ids = clean_lookup_ids(ids)
            if not ids:
                return GetResult(ids=[], documents=[], metadatas=[], embeddings=[] if spec.embeddings else None)
            parts.append(sql.SQL("id = ANY(%s::text[])"))
            params = params + [ids]
        # Filing order, as Chroma returns records (a record keeps its place when updated); the
        # records_filing_order index serves pages of it.
        query = sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY seq").format(
            columns, self._table, sql.SQL(" AND ").join(parts))
        if limit is not None:
            query += sql.SQL(" LIMIT %s")
            params.append(max(0, int(limit)))
        if offset:
            query += sql.SQL(" OFFSET %s")
            params.append(max(0, int(offset)))
        rows = db.run(lambda conn: conn.execute(query, params).fetchall())
        return self._to_result(rows, names, spec)

    def get_all_rows(self, where=None, include=None) -> GetResult:
        """Every matching record in one statement (no paging, no rescans)."""
        include = list(include) if include else ["metadatas"]
        return self.get(where=where, include=include)

    def get_all_metadata(self, where=None) -> list[dict]:
        db = self._open()
        condition, params = self._filters(where)
        # Binary COPY streams jsonb as raw JSON text (a version byte, then the text: no escaping), and
        # parsing it a few thousand rows at a time as one JSON array is several times faster than a
        # driver-built dict per row, while the server keeps streaming.
        # In filing order, as Chroma gives them (MemPalace's status lists ties in that order).
        query = sql.SQL("COPY (SELECT metadata FROM {} WHERE {} ORDER BY seq) TO STDOUT (FORMAT BINARY)").format(
            self._table, condition)

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
        db = self._open()
        order_field = storable(order_field) if isinstance(order_field, str) else order_field
        if limit is None or int(limit) <= 0:
            return GetResult.empty()
        spec = _IncludeSpec.resolve(
            ["documents", "metadatas"] if include is None else include, default_distances=False)
        condition, params = self._filters(where)
        columns, names = self._columns(spec)
        if order_field == "filed_at":
            # the records_filed_at index holds filed_at's first characters; ties go to the whole value
            key = sql.SQL('left(filed_at, {}) COLLATE "C" DESC NULLS LAST, filed_at COLLATE "C" DESC').format(
                sql.Literal(INDEX_PREFIX["filed_at"]))
            order_params: list = []
        else:
            key = sql.SQL(
                "(CASE WHEN jsonb_typeof(metadata -> %s) = 'string' THEN metadata ->> %s END) "
                'COLLATE "C" DESC NULLS LAST')
            order_params = [order_field, order_field]
        query = sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY {}, seq LIMIT %s").format(
            columns, self._table, condition, key)
        rows = db.run(lambda conn: conn.execute(query, params + order_params + [int(limit)]).fetchall())
        return self._to_result(rows, names, spec)

    def facet_counts(self, field: str, where=None, limit: int = 1000) -> dict[str, int]:
        """Count of records per value of a metadata field (records without it are not counted)."""
        db = self._open()
        field = storable(field) if isinstance(field, str) else field
        fast = self._facet_fast_path(field, where)
        if fast is not None:
            key_filter, fparams = fast
            query = sql.SQL(
                "SELECT k, sum(n) FROM (SELECT {f} #>> '{{}}' AS k, n FROM {t} WHERE collection_pk = %s {w}) s "
                "WHERE k IS NOT NULL GROUP BY k HAVING sum(n) > 0 ORDER BY 2 DESC, 1 LIMIT %s"
            ).format(f=sql.Identifier(field), t=db.ident("facet_counts"), w=key_filter)
            rows = db.run(lambda conn: conn.execute(query, [self._pk, *fparams, int(limit)]).fetchall())
            return {str(k): int(c) for k, c in rows}
        condition, params = self._filters(where)
        if field in ("wing", "room", "source_file", "filed_at"):
            # The string-only columns miss non-string values: fall back to the JSON text for those.
            value = sql.SQL("COALESCE({}, metadata ->> %s)").format(sql.Identifier(field))
        else:
            value = sql.SQL("metadata ->> %s")
        query = sql.SQL(
            "SELECT k, count(*) FROM (SELECT {v} AS k FROM {t} WHERE {c}) AS s WHERE k IS NOT NULL "
            "GROUP BY k ORDER BY 2 DESC, 1 LIMIT %s").format(v=value, t=self._table, c=condition)
        rows = db.run(lambda conn: conn.execute(query, [field] + params + [int(limit)]).fetchall())
        return {str(k): int(c) for k, c in rows}

    def wing_room_counts(self) -> tuple[int, dict]:
        """``(total, {wing: {room: n}})`` from the trigger-kept counts, as MemPalace's Chroma reader
        (``_sqlite_wing_room_counts``) returns it: strings as they are, numbers as text, anything else
        (missing, bool, list, null) ``"?"``; wings and rooms in byte order."""
        db = self._open()
        query = sql.SQL(
            "SELECT w, r, n FROM (SELECT"
            " COALESCE(CASE WHEN jsonb_typeof(wing) IN ('string', 'number') THEN wing #>> '{{}}' END, '?') AS w,"
            " COALESCE(CASE WHEN jsonb_typeof(room) IN ('string', 'number') THEN room #>> '{{}}' END, '?') AS r,"
            " sum(n) AS n FROM {} WHERE collection_pk = %s GROUP BY 1, 2 HAVING sum(n) > 0) AS c"
            " ORDER BY w COLLATE \"C\", r COLLATE \"C\"").format(db.ident("facet_counts"))
        rows = db.run(lambda conn: conn.execute(query, (self._pk,)).fetchall())
        counts: dict = {}
        for wing, room, n in rows:
            rooms = counts.setdefault(wing, {})
            rooms[room] = rooms.get(room, 0) + int(n)
        return sum(int(r[2]) for r in rows), counts

    def grouped_counts(self) -> list[tuple]:
        """``(room, wing, hall, n, last_date)`` per room, wing and hall: what MemPalace's palace graph,
        tunnels, hallways and audit read from Chroma's or sqlite_exact's tables. Values as Chroma
        spells them ('' when missing or not a string or number); ``last_date`` the greatest string
        ``date`` of the group, bytewise, or ''."""
        db = self._open()
        spelled = "COALESCE(CASE WHEN jsonb_typeof(metadata -> {k}) IN ('string', 'number') THEN metadata ->> {k} END, '')"
        query = sql.SQL(
            "SELECT " + spelled.format(k="'room'") + ", " + spelled.format(k="'wing'") + ", "
            + spelled.format(k="'hall'") + ", count(*), COALESCE(max(CASE WHEN jsonb_typeof(metadata -> 'date') = "
            "'string' THEN metadata ->> 'date' END COLLATE \"C\"), '') FROM {} GROUP BY 1, 2, 3").format(self._table)
        return [tuple(r) for r in db.run(lambda conn: conn.execute(query).fetchall())]

    def wing_source_counts(self) -> list[tuple]:
        """``(wing, source_file, n)`` for drawers mined from Claude Code or Codex transcripts (a
        ``source_file`` under ``.claude/projects`` or ``.codex/sessions``, matched as SQLite's LIKE
        matches, ASCII case folded): what ``mempalace audit`` and ``wings split`` read from Chroma's
        tables. ``wing`` is '' when missing or not a string."""
        db = self._open()
        query = sql.SQL(
            "SELECT COALESCE(wing, CASE WHEN jsonb_typeof(metadata -> 'wing') = 'string' THEN metadata ->> 'wing' END, ''),"
            " source_file, count(*) FROM {} WHERE source_file IS NOT NULL"
            " AND (source_file ILIKE '%%.claude%%projects%%' OR source_file ILIKE '%%.codex%%sessions%%')"
            " GROUP BY 1, 2").format(self._table)
        return [tuple(r) for r in db.run(lambda conn: conn.execute(query).fetchall())]

    def _facet_fast_path(self, field: str, where) -> Optional[tuple[sql.Composable, list]]:
        """facet_counts answered from the counts table: wing or room, with no filter or a filter of
        wing/room string equalities (what MemPalace's status, list_wings, list_rooms and taxonomy ask)."""
        if field not in ("wing", "room"):
            return None
        keys = wing_room_equalities(where)
        return None if keys is None else self._facet_key_filter(keys)

    @staticmethod
    def _facet_key_filter(keys: dict) -> tuple[sql.Composable, list]:
        parts = [sql.SQL("AND {} = %s::jsonb").format(sql.Identifier(k)) for k in keys]
        return sql.SQL(" ").join(parts), [json.dumps(v) for v in keys.values()]

    def _wing_room_gate(self, keys: Optional[dict]) -> Optional[tuple[sql.Composable, list]]:
        """How many records a wing/room filter matches, as SQL over facet_counts (None: no such filter)."""
        if not keys:
            return None
        key_filter, key_params = self._facet_key_filter(keys)
        return (sql.SQL("SELECT COALESCE(sum(n), 0) AS n FROM {} WHERE collection_pk = %s {}").format(
            self._db.ident("facet_counts"), key_filter), [self._pk, *key_params])

    def nearest_sql(self, columns: sql.Composable, condition: sql.Composable, cparams: list, q: Any, n: int,
                    dim: int, *, filtered: bool, gate: Optional[tuple[sql.Composable, list]] = None,
                    layout: Optional[indexing.Layout] = None) -> tuple[sql.Composable, list]:
        """The statement (also usable as a subquery) of the ``n`` records nearest to ``q`` that meet
        ``condition``: ``columns`` plus ``distance``, nearest first. Parameters are positional.

        One arm per vector index segment of ``layout`` (default: :meth:`vector_layout`; a caller that
        keeps the statement keeps it per layout), each walking its HNSW graph with an iterative scan so
        a filter still fills n; one exact scan over the tail, the rows no segment holds yet; and, when
        ``gate`` (SQL counting the records the filter can match, e.g. from facet_counts) says at most
        EXACT_SCAN_MAX, an exact scan instead of all of them: scanning a thousand rows by B-tree beats
        walking the graphs for them, at recall 1.0. Arms not taken are cut off by one-time filters,
        inside the same statement. The index arms walk half-precision graphs and re-rank by the exact
        distance; a filtered search takes FILTERED_OVERSAMPLE times the candidates first, which lifts recall.

        The row counts and segment bounds are written into the statement (see :func:`row_count`), so
        that PostgreSQL plans it once, matches each arm to its partial index, and reuses the plan.
        """
        layout = layout or self.vector_layout()
        fmt = dict(cols=columns, vt=self._vector_type(dim), ht=self._half_type(dim), t=self._table,
                   cond=condition, n=row_count(n))
        # each segment holds a share of the matches: it oversamples by that share (at least n)
        candidates = row_count(min(MAX_ROW_COUNT, max(n, math.ceil(FILTERED_OVERSAMPLE * n * layout.largest)))
                               if filtered else n)
        parts, params, arms = [], [], []
        gate_ann = sql.SQL("")
        if gate is not None:
            count_sql, count_params = gate
            gate_ann = sql.SQL(" AND (SELECT n FROM matching) > {}").format(sql.Literal(EXACT_SCAN_MAX))
            parts.append(sql.SQL("matching AS MATERIALIZED ({})").format(count_sql))
            parts.append(sql.SQL(
                "exact AS MATERIALIZED ("
                " SELECT {cols}, (embedding::{vt} <=> %s::{vt}) AS distance FROM {t}"
                " WHERE {cond} AND (SELECT n FROM matching) <= {max} ORDER BY distance, id LIMIT {n})"
            ).format(max=sql.Literal(EXACT_SCAN_MAX), **fmt))
            params += [*count_params, q, *cparams]
            arms.append("exact")
        for i, (lo, hi) in enumerate(layout.segments):
            arm = f"segment_{i}"
            parts.append(sql.SQL(
                "{arm} AS MATERIALIZED ("
                " SELECT {cols}, (embedding::{vt} <=> %s::{vt}) AS distance FROM {t}"
                " WHERE {seg} AND {cond}{gate} ORDER BY embedding::{ht} <=> %s::{ht} LIMIT {k})"
            ).format(arm=sql.Identifier(arm), seg=indexing.segment_condition(lo, hi), gate=gate_ann,
                     k=candidates, **fmt))
            params += [q, *cparams, q]
            arms.append(arm)
        parts.append(sql.SQL(
            "tail AS MATERIALIZED ("
            " SELECT {cols}, (embedding::{vt} <=> %s::{vt}) AS distance FROM {t}"
            " WHERE {tail} AND {cond}{gate} ORDER BY distance LIMIT {n})").format(
            tail=indexing.tail_condition(layout), gate=gate_ann, **fmt))
        params += [q, *cparams]
        arms.append("tail")
        union = sql.SQL(" UNION ALL ").join(sql.SQL("SELECT * FROM {}").format(sql.Identifier(a)) for a in arms)
        query = sql.SQL("WITH {} SELECT * FROM ({}) AS hits ORDER BY distance + 0, id LIMIT {}").format(
            sql.SQL(", ").join(parts), union, row_count(n))
        return query, params

    def query(self, *, query_texts=None, query_embeddings=None, n_results=10, where=None,
              where_document=None, include=None) -> QueryResult:
        """Nearest records by cosine distance (lower is closer), filters applied in SQL.

        Uses the collection's HNSW index with iterative scans, so a filtered query still returns
        ``n_results`` rows when that many match.
        """
        db = self._open()
        if query_texts is not None and query_embeddings is None:
            raise ValueError("the postgres backend needs query_embeddings (MemPalace embeds queries itself)")
        if query_embeddings is None or len(query_embeddings) == 0:
            raise ValueError("query requires a non-empty list of query_embeddings")
        spec = _IncludeSpec.resolve(include)
        condition, fparams = self._filters(where, where_document)
        queries = as_matrix(query_embeddings, list(range(len(query_embeddings))), what="query embedding")
        n = clamped_row_count(n_results)
        dim = self._dimension or self._fetch_dimension()
        if dim is None or n == 0:
            # Nothing was ever written (or nothing asked for): an empty answer of the right shape.
            return QueryResult.empty(len(queries), embeddings_requested=spec.embeddings)
        if queries.shape[1] != dim:
            raise DimensionMismatchError(
                f"query embeddings have {queries.shape[1]} dimensions; collection {self.name!r} holds {dim}")
        columns, names = self._columns(spec)
        out: dict[str, list] = {"ids": [], "documents": [], "metadatas": [], "distances": [], "embeddings": []}
        entry = self._nearest_statement(spec, columns, condition, fparams, where, where_document, n, dim)

        def work(conn: psycopg.Connection) -> None:
            query, template = StatementCache.sql(entry, conn), entry[1]
            for q in queries:
                rows = conn.execute(query, fill(template, q=q)).fetchall()
                res = self._to_result(rows, names, spec)
                out["ids"].append(res.ids)
                out["documents"].append(res.documents)
                out["metadatas"].append(res.metadatas)
                out["distances"].append([_distance(r[-1]) for r in rows] if spec.distances else [])
                out["embeddings"].append(res.embeddings)

        db.run(work)
        return QueryResult(
            ids=out["ids"], documents=out["documents"], metadatas=out["metadatas"],
            distances=out["distances"], embeddings=out["embeddings"] if spec.embeddings else None,
        )

    def _nearest_statement(self, spec: _IncludeSpec, columns: sql.Composable, condition: sql.Composable,
                           fparams: list, where, where_document, n: int, dim: int) -> list:
        """query()'s statement and parameter template, kept per filter, shape and vector index layout."""
        layout = self.vector_layout()
        try:
            key = (json.dumps([where, where_document], sort_keys=True, allow_nan=False),
                   spec.documents, spec.metadatas, spec.embeddings, n, dim, layout)
        except (TypeError, ValueError):
            key = None  # a filter value JSON cannot spell exactly: build it, don't keep it

        def build():
            keys = wing_room_equalities(where) if not where_document else None
            query, template = self.nearest_sql(columns, condition, fparams, QUERY_VECTOR, n, dim,
                                               filtered=bool(where or where_document),
                                               gate=self._wing_room_gate(keys), layout=layout)
            return query, template, indexing.search_breadth(layout, self._db.settings.ef_search)

        return self._statements.get(key, build)

    def lexical_sql(self, query: Any, condition: sql.Composable, params: list, n: int, *,
                    rows: bool = True) -> tuple[sql.Composable, list]:
        """The statement (also usable as a subquery) ranking records that meet ``condition`` by the
        words of the text ``query``: id, document, metadata, score, best first (``rows=False``: id and
        score only). Parameters are positional; ``query`` is the first after the collection key.

        The query is split into words in SQL, by the function that splits the documents
        (lexical_text(), sql/0006), and its words of two or more characters are searched (MemPalace's
        BM25 ignores shorter ones)."""
        db = self._db
        # Per word: its document frequency, counted through the GIN index up to LEXICAL_DF_CAP
        # (a word found that often is common and weighs little, so the exact count does not matter),
        # an idf weight, and candidates: every document of a rare word (fewer than the cap), a bounded
        # sample for a common one. Each candidate is scored from the tsvector its index scan already
        # read (sum over the words of idf * ts_rank); only the best n are then looked up by id for their
        # document and metadata. (Table {t} is the collection's own partition, so counting needs no
        # collection_pk test.)
        stmt = sql.SQL(
            "WITH total AS (SELECT GREATEST(COALESCE(sum(n), 0), 1)::float8 AS n FROM {counts}"
            "  WHERE collection_pk = %s),"
            " weighted AS MATERIALIZED ("
            "  SELECT q, df.n AS df, ln((total.n - df.n + 0.5) / (df.n + 0.5) + 1) AS idf"
            "  FROM (SELECT quote_literal(w)::tsquery AS q"
            "   FROM unnest(tsvector_to_array(to_tsvector('simple', {lexical_text}(%s::text)))) AS w"
            "   WHERE length(w) >= 2) AS words"
            "  CROSS JOIN total"
            "  CROSS JOIN LATERAL (SELECT count(*)::float8 AS n FROM (SELECT 1 FROM {t}"
            "    WHERE document_tsv @@ words.q LIMIT %s) AS m) AS df"
            "  WHERE numnode(q) > 0),"
            " candidates AS ("
            "  SELECT c.id, c.tsv FROM weighted CROSS JOIN LATERAL ("
            "    SELECT id, document_tsv AS tsv FROM {t}"
            "    WHERE weighted.df < %s AND document_tsv @@ weighted.q AND {cond}) AS c"
            "  UNION ALL"
            "  SELECT c.id, c.tsv FROM weighted CROSS JOIN LATERAL ("
            "    SELECT id, document_tsv AS tsv FROM {t}"
            "    WHERE weighted.df >= %s AND document_tsv @@ weighted.q AND {cond} LIMIT %s) AS c),"
            " scored AS ("
            "  SELECT d.id, (SELECT sum(w.idf * ts_rank(d.tsv, w.q, 1)) FROM weighted AS w) AS score"
            "  FROM (SELECT DISTINCT ON (id COLLATE \"C\") id, tsv FROM candidates ORDER BY id COLLATE \"C\") AS d"
            "  ORDER BY score DESC, d.id LIMIT %s)"
        ).format(t=self._table, counts=db.ident("facet_counts"), cond=condition,
                 lexical_text=db.ident("lexical_text"))
        per_word = max(LEXICAL_CANDIDATES, 4 * n)
        args = [self._pk, query, LEXICAL_DF_CAP, LEXICAL_DF_CAP, *params, LEXICAL_DF_CAP, *params, per_word, n]
        if not rows:
            return stmt + sql.SQL(" SELECT id, score FROM scored ORDER BY score DESC, id"), args
        return stmt + sql.SQL(
            " SELECT r.id, r.document, r.metadata, s.score"
            " FROM scored AS s JOIN {t} AS r ON r.collection_pk = %s AND r.id = s.id"
            " ORDER BY s.score DESC, r.id").format(t=self._table), [*args, self._pk]

    def lexical_search(self, *, query: str, n_results: int = 10, where=None) -> LexicalResult:
        """Full-text search in SQL, ranked like BM25 would: rare words count for more.

        Words are runs of letters and numbers (everything else separates them, as in SQLite FTS5),
        lower-cased; any query word of 2+ characters matches (as MemPalace's BM25 counts words).
        Candidates come from the GIN-indexed tsvector: all documents of a rare word, a bounded sample
        for a common one;
        each is scored as the sum over the query words of idf(word) * ts_rank(document, word), with
        idf from the word's document frequency (counted through the index up to a cap). One
        statement; filters apply in SQL.
        """
        db = self._open()
        query = storable(query) if isinstance(query, str) else ""
        if not query.strip() or int(n_results) <= 0:
            return LexicalResult(hits=[])
        condition, params = self._filters(where)
        stmt, args = self.lexical_sql(query, condition, params, int(n_results))
        rows = db.run(lambda conn: conn.execute(stmt, args).fetchall())
        return LexicalResult(hits=[LexicalHit(id=r[0], document=r[1], metadata=r[2], score=float(r[3]))
                                   for r in rows if r[3] and r[3] > 0])

    # -- identity, maintenance, lifecycle -----------------------------------------------------
    def get_stored_embedder_identity(self) -> Optional[EmbedderIdentity]:
        db = self._open()
        query = sql.SQL("SELECT embedder_model, embedder_dimension FROM {} WHERE collection_pk = %s"
                        ).format(db.ident("collections"))
        row = db.run(lambda conn: conn.execute(query, (self._pk,)).fetchone())
        if not row or not row[0]:
            return None
        return EmbedderIdentity(model_name=row[0], dimension=int(row[1] or 0))

    def set_embedder_identity(self, identity: EmbedderIdentity) -> None:
        db = self._open()
        query = sql.SQL("UPDATE {} SET embedder_model = %s, embedder_dimension = %s, "
                        "embedder_recorded_at = now() WHERE collection_pk = %s").format(db.ident("collections"))
        db.run(lambda conn: conn.execute(query, (identity.model_name, int(identity.dimension or 0), self._pk)))

    def effective_embedder_identity(self) -> Optional[EmbedderIdentity]:
        return None  # MemPalace embeds for us; its configured model is the identity

    def estimated_count(self) -> int:
        db = self._open()
        query = "SELECT GREATEST(reltuples, 0)::bigint FROM pg_class WHERE oid = %s::regclass"
        return int(db.run(lambda conn: conn.execute(query, (self._relname,)).fetchone()[0]))

    def maintenance_state(self) -> dict:
        db = self._open()
        query = sql.SQL(
            "SELECT (SELECT count(*) FROM {t}), "
            " (SELECT array_agg(index_name ORDER BY lo) FROM {segs} WHERE collection_pk = %(pk)s), "
            " (SELECT bool_and(i.indisvalid) FROM {segs} s JOIN pg_class c ON c.relname = s.index_name"
            "   JOIN pg_index i ON i.indexrelid = c.oid WHERE s.collection_pk = %(pk)s"
            "   AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = %(rel)s::regclass)), "
            " (SELECT GREATEST(last_analyze, last_autoanalyze) FROM pg_stat_user_tables WHERE relid = %(rel)s::regclass), "
            " (SELECT n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables WHERE relid = %(rel)s::regclass)"
        ).format(t=self._table, segs=db.ident("vector_segments"))
        rel = self._relname
        count, segments, valid, analyzed, changes = db.run(
            lambda conn: conn.execute(query, {"rel": rel, "pk": self._pk}).fetchone())
        return {
            "rows": int(count),
            "fresh_rows": self.fresh_count(),
            "dimension": self._dimension,
            "vector_index": segments[-1] if segments else None,
            "vector_index_segments": list(segments or []),
            "vector_index_valid": valid,
            "last_analyze": analyzed.isoformat() if analyzed else None,
            "consistency_token": int(changes or 0),
        }

    def run_maintenance(self, kind: str) -> MaintenanceResult:
        if kind not in self._backend.maintenance_kinds:
            raise UnsupportedMaintenanceKindError(f"postgres backend has no maintenance kind {kind!r}")
        db = self._open()
        rel = self._relname
        key = f"mempalace_pg:{kind}:{rel}"
        with db.connection() as conn:
            got = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()[0]
            if not got:
                return MaintenanceResult(kind=kind, status="already_running")
            try:
                if kind == "analyze":
                    # the palace's knowledge graph shares the database: refresh its planner statistics too
                    graph = f"{db.schema}_kg"
                    conn.execute(sql.SQL("ANALYZE {}, {}, {}").format(
                        self._table, sql.Identifier(graph, "Entity"), sql.Identifier(graph, "Fact")))
                    return MaintenanceResult(kind=kind, status="ran",
                                             stats={"table": rel, "graph": graph})
                dim = self._dimension or self._fetch_dimension()
                if dim is None:
                    return MaintenanceResult(kind=kind, status="noop", stats={"reason": "empty collection"})
                t0 = time.perf_counter()
                self._build_vector_index(conn, dim)
                return MaintenanceResult(kind=kind, status="ran",
                                         stats={"table": rel, "seconds": round(time.perf_counter() - t0, 3)})
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))

    def health(self) -> HealthStatus:
        if self._closed or self._backend._closed:
            return HealthStatus.unhealthy("collection closed")
        try:
            self.count()
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            return HealthStatus.unhealthy(str(exc))
        return HealthStatus.healthy()

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
