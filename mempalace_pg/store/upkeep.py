"""A collection's upkeep: the embedder identity it records, its maintenance (``analyze``, ``reindex``) and
the state MemPalace reads before choosing one, and its health."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Optional

from mempalace.backends.base import (
    EmbedderIdentity,
    HealthStatus,
    MaintenanceResult,
    UnsupportedMaintenanceKindError,
)
from psycopg import sql

from mempalace_pg.db import locks
from mempalace_pg.engine import statistics, words

if TYPE_CHECKING:
    from mempalace_pg.db.pool import Database
    from mempalace_pg.store.partition import Partition


class CollectionUpkeep:
    """Identity, maintenance and health of :class:`~mempalace_pg.store.collection.PostgresCollection`
    (which inherits them): they use its ``partition``, ``database()``, ``count()`` and its backend."""

    partition: "Partition"
    database: "Callable[[], Database]"

    # -- identity, maintenance, lifecycle -----------------------------------------------------
    def get_stored_embedder_identity(self) -> Optional[EmbedderIdentity]:
        db = self.database()
        query = sql.SQL(
            "SELECT embedder_model, embedder_dimension FROM {} WHERE collection_pk = %(pk)s"
        ).format(db.ident("collections"))
        row = db.run(lambda conn: conn.execute(query, {"pk": self.partition.pk}).fetchone())
        if not row or not row[0]:
            return None
        return EmbedderIdentity(model_name=row[0], dimension=int(row[1] or 0))

    def set_embedder_identity(self, identity: EmbedderIdentity) -> None:
        db = self.database()
        query = sql.SQL(
            "UPDATE {} SET embedder_model = %(model)s, embedder_dimension = %(dimension)s, "
            "embedder_recorded_at = now() WHERE collection_pk = %(pk)s"
        ).format(db.ident("collections"))
        params = {
            "model": identity.model_name,
            "dimension": int(identity.dimension or 0),
            "pk": self.partition.pk,
        }
        db.run(lambda conn: conn.execute(query, params))

    def effective_embedder_identity(self) -> Optional[EmbedderIdentity]:
        return None  # MemPalace embeds for us; its configured model is the identity

    def estimated_count(self) -> int:
        db = self.database()
        query = "SELECT GREATEST(reltuples, 0)::bigint FROM pg_class WHERE oid = %s::regclass"
        return int(db.run(lambda conn: conn.execute(query, (self.partition.relname,)).fetchone()[0]))

    def maintenance_state(self) -> dict:
        db = self.database()
        query = sql.SQL(
            "SELECT (SELECT count(*) FROM {t}), "
            " (SELECT array_agg(index_name ORDER BY lo) FROM {segs} WHERE collection_pk = %(pk)s), "
            " (SELECT bool_and(i.indisvalid) FROM {segs} s JOIN pg_class c ON c.relname = s.index_name"
            "   JOIN pg_index i ON i.indexrelid = c.oid WHERE s.collection_pk = %(pk)s"
            "   AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = %(rel)s::regclass)), "
            " (SELECT GREATEST(last_analyze, last_autoanalyze) FROM pg_stat_user_tables WHERE relid = "
            "%(rel)s::regclass), "
            " (SELECT n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables WHERE relid = "
            "%(rel)s::regclass)"
        ).format(t=self.partition.table, segs=db.ident("vector_segments"))
        rel = self.partition.relname
        count, segments, valid, analyzed, changes = db.run(
            lambda conn: conn.execute(query, {"rel": rel, "pk": self.partition.pk}).fetchone()
        )
        return {
            "rows": int(count),
            "fresh_rows": self.partition.index.fresh_count(),
            "dimension": self.partition.dimension,
            "vector_index": segments[-1] if segments else None,
            "vector_index_segments": list(segments or []),
            "vector_index_valid": valid,
            "last_analyze": analyzed.isoformat() if analyzed else None,
            "consistency_token": int(changes or 0),
        }

    def run_maintenance(self, kind: str) -> MaintenanceResult:
        if kind not in self._backend.maintenance_kinds:
            raise UnsupportedMaintenanceKindError(f"postgres backend has no maintenance kind {kind!r}")
        db = self.database()
        rel = self.partition.relname
        key = locks.maintenance_key(kind, rel)
        # a session lock held across statements (and a VACUUM): a session of its own, even behind a pooler
        with db.session(f"maintenance {kind!r}") as conn:
            if not locks.try_acquire(conn, key):
                return MaintenanceResult(kind=kind, status="already_running")
            try:
                if kind == "analyze":
                    stats = self._analyze(conn)
                    words.remember_common_words(conn, db.schema, self.partition.pk)
                    return MaintenanceResult(kind=kind, status="ran", stats=stats)
                dim = self.partition.known_dimension()
                if dim is None:
                    return MaintenanceResult(kind=kind, status="noop", stats={"reason": "empty collection"})
                t0 = time.perf_counter()
                self.partition.build_vector_index(conn, dim)
                return MaintenanceResult(
                    kind=kind,
                    status="ran",
                    stats={"table": rel, "seconds": round(time.perf_counter() - t0, 3)},
                )
            finally:
                locks.release(conn, key)

    def _analyze(self, conn) -> dict:
        """ANALYZE the records partition and the knowledge graph's tables (the palace's graph shares the
        database). The partition's ANALYZE waits for the table lock a folder's concurrent build holds, and
        the build waits for ANALYZE's snapshot, so it first takes the segments lock (db/locks.py). When the
        folder holds it (a build of minutes after a big write), the folder is asked to analyze the
        partition once the build ends (engine/statistics.py), and this call returns at once."""
        db = self.database()
        pk, rel = self.partition.pk, self.partition.relname
        graph = db.settings.graph
        graph_tables = [sql.Identifier(graph, "Entity"), sql.Identifier(graph, "Fact")]
        stats: dict = {"table": rel, "graph": graph}
        segments = locks.segments_key(db.schema, pk)
        if not locks.try_acquire(conn, segments):
            if statistics.folder_building(conn, db.schema, pk):
                statistics.ask_after_build(conn, db.schema, pk)
                conn.execute(sql.SQL("ANALYZE {}").format(sql.SQL(", ").join(graph_tables)))
                stats["table_analyzed_by"] = "the folder, when its index build ends"
                return stats
            locks.acquire(conn, segments, what=f"maintenance 'analyze' of {rel}")
        try:
            conn.execute(
                sql.SQL("ANALYZE {}").format(sql.SQL(", ").join([self.partition.table, *graph_tables]))
            )
        finally:
            locks.release(conn, segments)
        return stats

    def health(self) -> HealthStatus:
        if self._closed or self._backend.closed:
            return HealthStatus.unhealthy("collection closed")
        try:
            self.count()
        except Exception as exc:  # reported, not raised
            return HealthStatus.unhealthy(str(exc))
        return HealthStatus.healthy()


__all__ = ["CollectionUpkeep"]
