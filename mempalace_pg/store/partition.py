"""One collection's partition of ``<schema>.records`` (``records_c<pk>``): what is written to it and how.

:class:`~mempalace_pg.store.collection.PostgresCollection` is MemPalace's API; a :class:`Partition`
is the storage under it, shared with the bulk loader, the vector index folder, units of work and
retrieval: the collection's vector width (fixed at its first write), writing validated rows (one
INSERT, or binary COPY), building its vector index, the SQL condition of a MemPalace filter on it,
and the statement that deletes records from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np
import psycopg
from mempalace.backends.base import DimensionMismatchError
from psycopg import sql
from psycopg.types.json import Jsonb

from mempalace_pg.db.schema import records_table
from mempalace_pg.engine import builds, words
from mempalace_pg.engine.indexing import SegmentIndex
from mempalace_pg.store.filters import compile_filters
from mempalace_pg.store.records import clean_lookup_ids

if TYPE_CHECKING:
    from mempalace_pg.db.pool import Database

#: The collection whose records are drawers (facts name them as their source_drawer_id).
DRAWERS_COLLECTION = "mempalace_drawers"
#: Batches at least this large go through COPY into a staging table instead of one INSERT.
COPY_THRESHOLD = 2000


class Partition:
    """The records of one collection: table ``records_c<pk>`` of the database's schema.

    ``dimension`` is the collection's vector width as this process knows it (None until the first
    write fixes it); ``read_only`` says whether this process may write."""

    def __init__(
        self, db: "Database", pk: int, name: str, *, dimension: Optional[int] = None, read_only: bool = False
    ):
        self.db = db
        self.pk = pk
        self.name = name
        self.dimension = dimension
        self.read_only = read_only
        self.table_name = records_table(pk)
        self.table = db.records(pk)
        self.relname = f"{db.schema}.{self.table_name}"  # for ::regclass and advisory-lock keys
        #: its vector index, as this process sees and drives it
        self.index = SegmentIndex(db, pk, read_only=read_only)

    def __repr__(self) -> str:
        return f"<Partition {self.table_name} ({self.name})>"

    def check_writable(self) -> None:
        """Raise PermissionError when this process opened the collection read-only."""
        if self.read_only:
            raise PermissionError(f"collection {self.name!r} was opened read-only")

    def condition(self, where=None, where_document=None) -> tuple[sql.Composable, dict]:
        """The SQL condition for a MemPalace filter on this collection, and its parameters (named
        ``f0``, ``f1``, ...).

        It always names the partition key too, so the primary key (collection_pk, id) serves id lookups.
        """
        condition, params = compile_filters(where, where_document)
        return sql.SQL("collection_pk = {} AND {}").format(sql.Literal(self.pk), condition), params

    # -- the vector width -----------------------------------------------------------------------
    def fetch_dimension(self) -> Optional[int]:
        """The width another process may have fixed since this handle was opened."""
        query = sql.SQL("SELECT dimension FROM {} WHERE collection_pk = %(pk)s").format(
            self.db.ident("collections")
        )
        row = self.db.run(lambda conn: conn.execute(query, {"pk": self.pk}).fetchone())
        self.dimension = row[0] if row else None
        return self.dimension

    def known_dimension(self) -> Optional[int]:
        """The width, read from the database if this process does not know it yet."""
        return self.dimension or self.fetch_dimension()

    def check_dimension(self, dim: int) -> None:
        """Raise DimensionMismatchError if ``dim`` is not the width this process knows (if it knows one)."""
        if self.dimension is not None and self.dimension != dim:
            raise self._width_mismatch(self.dimension, dim)

    def claim_width(self, conn: psycopg.Connection, dim: int) -> int:
        """The width for a batch of ``dim``-wide vectors, on ``conn``: the known one, or fixed now (first
        write). Raises DimensionMismatchError when they differ. The caller records the returned width in
        ``dimension`` once its transaction commits.

        The row lock taken by the UPDATE serializes concurrent first writers of one collection.
        """
        stored = self.dimension
        if stored is None:
            stored = conn.execute(
                sql.SQL(
                    "UPDATE {} SET dimension = COALESCE(dimension, %(dim)s) WHERE collection_pk = %(pk)s "
                    "RETURNING dimension"
                ).format(self.db.ident("collections")),
                {"dim": dim, "pk": self.pk},
            ).fetchone()[0]
        if stored != dim:
            raise self._width_mismatch(stored, dim)
        return stored

    def _width_mismatch(self, stored: int, dim: int) -> DimensionMismatchError:
        return DimensionMismatchError(
            f"collection {self.name!r} holds {stored}-dimension vectors; this batch has {dim}. "
            "Use the embedder the palace was built with (see `mempalace palace set-embedder`)."
        )

    # -- the vector index ------------------------------------------------------------------------
    def build_vector_index(self, conn: psycopg.Connection, dim: int, *, keep_full: bool = False) -> None:
        """Make every row one vector index segment, built in one go (writes wait for it), then merge the
        GIN pending lists and refresh statistics. For bulk loads and ``reindex``; ``keep_full`` (a bulk
        load): the full segments already built stay, only the rows after them are built
        (:func:`builds.rebuild`).

        ``conn`` is a session (autocommit, :meth:`Database.session`): the build's settings are reset after.
        """
        builds.build_session(conn)
        try:
            builds.rebuild(conn, self.db.schema, self.pk, dim, keep_full=keep_full)
            self.index.forget()
            # Merge what the load left in the GIN indexes' pending lists (every search scans them).
            for name in self.gin_indexes(conn):
                conn.execute("SELECT gin_clean_pending_list(%s::regclass)", (f"{self.db.schema}.{name}",))
            # VACUUM as well as ANALYZE: a freshly loaded table otherwise draws autovacuum seconds later,
            # which then scans all of it while queries run. It costs little more than ANALYZE alone and
            # marks the pages all-visible: vector_bits' too, whose wing/room index answers a filter's
            # first pass by an index-only scan only on such pages (sql/0019).
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}, {}").format(self.table, self.db.ident("vector_bits")))
            words.remember_common_words(conn, self.db.schema, self.pk)
        finally:
            conn.execute("RESET maintenance_work_mem")
            conn.execute("RESET max_parallel_maintenance_workers")
            conn.execute("RESET client_connection_check_interval")
            conn.execute(
                "SELECT set_config('statement_timeout', %s, false)",
                (str(self.db.settings.statement_timeout_ms),),
            )

    def gin_indexes(self, conn: psycopg.Connection) -> list[str]:
        """The names of this collection's GIN indexes (full text, metadata): its partition's own."""
        return [
            name
            for (name,) in conn.execute(
                "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = %s::regclass AND a.amname = 'gin' "
                "ORDER BY 1",
                (self.relname,),
            )
        ]

    # -- writes ------------------------------------------------------------------------------------
    def write_rows(
        self,
        conn: psycopg.Connection,
        ids: list,
        documents: list,
        metas: list,
        matrix: np.ndarray,
        *,
        replace: bool,
    ) -> None:
        """Write validated rows on ``conn``: one INSERT, or for large batches a COPY into a staging table
        and one INSERT from it (then ``conn`` must be in a transaction)."""
        # add: a plain INSERT, so an existing id fails the whole statement (UniqueViolation);
        # upsert: replace document, metadata and embedding in place.
        conflict = (
            sql.SQL(
                "ON CONFLICT (collection_pk, {}(id)) DO UPDATE SET document = EXCLUDED.document, "
                "metadata = EXCLUDED.metadata, embedding = EXCLUDED.embedding, written_at = now(), "
                "vector_seq = DEFAULT"
            ).format(self.db.ident("text_key"))
            if replace
            else sql.SQL("")
        )
        if len(ids) >= COPY_THRESHOLD:
            stage = sql.Identifier(f"mempalace_pg_stage_{self.pk}")
            conn.execute(
                sql.SQL(
                    "CREATE TEMP TABLE IF NOT EXISTS {} (id text, document text, metadata jsonb, embedding "
                    "vector) "
                    "ON COMMIT DELETE ROWS"
                ).format(stage)
            )
            self._copy(conn, stage, ids, documents, metas, matrix, with_pk=False)
            source = sql.SQL("SELECT %(pk)s, id, document, metadata, embedding FROM {}").format(stage)
            params: dict = {"pk": self.pk}
        else:
            source = sql.SQL(
                "SELECT %(pk)s, u.id, u.document, u.metadata, u.embedding "
                "FROM unnest(%(ids)b::text[], %(documents)b::text[], %(metas)b::jsonb[], "
                "%(vectors)b::vector[]) "
                "AS u(id, document, metadata, embedding)"
            )
            params = {
                "pk": self.pk,
                "ids": ids,
                "documents": documents,
                "metas": [Jsonb(m) for m in metas],
                "vectors": list(matrix),
            }
        query = sql.SQL("INSERT INTO {} (collection_pk, id, document, metadata, embedding) {} {} ").format(
            self.table, source, conflict
        )
        conn.execute(query, params)

    def copy_rows(
        self, conn: psycopg.Connection, ids: list, documents: list, metas: list, matrix: np.ndarray
    ) -> None:
        """Binary COPY of validated rows straight into the partition (the bulk loader's path)."""
        self._copy(conn, self.table, ids, documents, metas, matrix, with_pk=True)

    def _copy(self, conn, table, ids, documents, metas, matrix, *, with_pk: bool) -> None:
        cols = ["collection_pk"] if with_pk else []
        cols += ["id", "document", "metadata", "embedding"]
        types = (["int4"] if with_pk else []) + ["text", "text", "jsonb", "vector"]
        prefix = (self.pk,) if with_pk else ()
        statement = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT BINARY)").format(
            table, sql.SQL(", ").join(map(sql.Identifier, cols))
        )
        with conn.cursor().copy(statement) as copy:
            copy.set_types(types)
            for i in range(len(ids)):
                copy.write_row(prefix + (ids[i], documents[i], Jsonb(metas[i]), matrix[i]))

    def delete_sql(self, *, ids=None, where=None) -> Optional[tuple[sql.Composable, dict]]:
        """The one statement deleting these records (None when nothing is selected).

        For drawers it also stamps the facts drawn from them (source_drawer_deleted_at), in the same
        statement: see kg_mark_drawers_deleted in sql/0003_graph_and_drawers.sql."""
        condition, params = self.condition(where)
        if ids is None and not where:
            return None  # nothing selected: delete nothing (never the whole collection by accident)
        parts = [condition]
        if ids is not None:
            ids = clean_lookup_ids(ids)
            if not ids:
                return None
            parts.append(sql.SQL("id = ANY(%(ids)s::text[])"))
            params = {**params, "ids": ids}
        query = sql.SQL("DELETE FROM {} WHERE {}").format(self.table, sql.SQL(" AND ").join(parts))
        if self.name == DRAWERS_COLLECTION:
            query = sql.SQL(
                "WITH gone AS ({} RETURNING id) SELECT {}((SELECT palace_pk FROM {} "
                "WHERE collection_pk = %(pk)s), array_agg(id)) FROM gone"
            ).format(query, self.db.ident("kg_mark_drawers_deleted"), self.db.ident("collections"))
            params = {**params, "pk": self.pk}
        return query, params


__all__ = ["COPY_THRESHOLD", "DRAWERS_COLLECTION", "Partition"]
