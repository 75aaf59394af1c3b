"""``PostgresBackend``: the MemPalace storage backend registered as ``postgres``.

MemPalace builds one instance per process with no arguments and asks it for collections:

    backend.get_collection(palace=PalaceRef(id=path, local_path=path),
                           collection_name="mempalace_drawers", create=True)

A palace is a row in ``<schema>.palaces`` keyed by (namespace, palace id); each of its collections
is a row in ``<schema>.collections`` with its records in a partition of ``<schema>.records``.
The palace directory holds only a small marker, ``mempalace_pg.json``, naming the database it
lives in (never a password), so MemPalace's palace detection is a file stat.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from datetime import datetime, timezone
from typing import Optional

from mempalace.backends.base import (
    BackendClosedError,
    BaseBackend,
    CollectionNotInitializedError,
    HealthStatus,
    PalaceNotFoundError,
    PalaceRef,
)
from psycopg import sql

from mempalace_pg.config import Settings, dsn_target
from mempalace_pg.db import locks
from mempalace_pg.db.schema import records_table
from mempalace_pg.marker import (
    BACKEND_NAME,
    MARKER_FILENAME,
    check_same_target,
    marker_path,
    read_marker,
    recorded_target,
    write_atomically,
)
from mempalace_pg.patching import apply_pending
from mempalace_pg.store.collection import COLLECTIONS, PostgresCollection
from mempalace_pg.text import storable

MARKER_FORMAT = 1


def _storable_ref(palace: PalaceRef) -> PalaceRef:
    """The palace as the database knows it: its id (a directory path, which may not be valid UTF-8) and
    namespace made storable (mempalace_pg.text); the local path is left for the file system."""
    palace_id = storable(palace.id) if isinstance(palace.id, str) else palace.id
    namespace = storable(palace.namespace) if isinstance(palace.namespace, str) else palace.namespace
    if palace_id == palace.id and namespace == palace.namespace:
        return palace
    return dataclasses.replace(palace, id=palace_id, namespace=namespace)


class PostgresBackend(BaseBackend):
    """MemPalace backend storing palaces in PostgreSQL with pgvector (and, for the graph, Apache AGE)."""

    name = BACKEND_NAME
    spec_version = "1.0"
    capabilities = frozenset(
        {
            "requires_explicit_embeddings",
            "supports_embeddings_in",
            "supports_embeddings_passthrough",
            "supports_embeddings_out",
            "supports_metadata_filters",
            "supports_lexical_search",
            "supports_metadata_facets",
            "supports_recency_order",
            "supports_namespace_isolation",
            "supports_server_side_indexes",
            "supports_update",
            "server_mode",
        }
    )
    distance_metric = "cosine"
    maintenance_kinds = frozenset({"analyze", "reindex"})

    def __init__(self) -> None:  # no I/O: MemPalace constructs every backend at discovery
        self._closed = False
        self._lock = threading.RLock()
        # (dsn, schema, namespace, palace key, collection name) -> (collection_pk, dimension)
        self._known: dict[tuple, tuple[int, Optional[int]]] = {}
        self._open_collections: dict[str, list[PostgresCollection]] = {}

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called (its collections then refuse work)."""
        return self._closed

    # -- MemPalace entry points ------------------------------------------------------------------
    @classmethod
    def detect(cls, path: str) -> bool:
        # MemPalace calls detect() of every backend before it resolves one, which is after its modules
        # finished importing: the moment to adapt any that the import hook could not (see hooks.py).
        apply_pending()
        try:
            return os.path.isfile(marker_path(path))
        except (TypeError, ValueError):
            return False

    def get_collection(
        self, *, palace: PalaceRef, collection_name: str, create: bool = False, options: Optional[dict] = None
    ) -> PostgresCollection:
        """MemPalace's way in: ``options`` are MemPalace's (``read_only``) and settings that override the
        environment's (``dsn``, ``schema``, ...). Code of this package that holds a :class:`Settings`
        calls :meth:`open_collection` with it instead, so that every one of its settings arrives."""
        options = dict(options or {})
        read_only = bool(options.pop("read_only", False))
        return self.open_collection(
            Settings.load(options),
            palace=palace,
            collection_name=collection_name,
            create=create,
            read_only=read_only,
        )

    def open_collection(
        self,
        settings: Settings,
        *,
        palace: PalaceRef,
        collection_name: str,
        create: bool = False,
        read_only: bool = False,
    ) -> PostgresCollection:
        """The collection ``collection_name`` of ``palace``, reached with ``settings`` whole (its pool
        sizes, search breadth, statement timeout and session DSN, not only its DSN and schema)."""
        if self._closed:
            raise BackendClosedError("the postgres backend has been closed")
        if not isinstance(palace, PalaceRef):
            raise TypeError("palace= must be a PalaceRef")
        palace = _storable_ref(palace)
        apply_pending()
        namespace = palace.namespace if palace.namespace is not None else settings.namespace
        target = self._target(settings, namespace, palace)

        marker = read_marker(palace.local_path) if palace.local_path else None
        if marker is not None:
            self._check_marker(marker, target, palace, settings)
        elif palace.local_path and not create:
            raise PalaceNotFoundError(
                f"no mempalace-pg palace at {palace.local_path} (no {MARKER_FILENAME}); "
                "its first write creates it: `mempalace --backend postgres mine <dir>` (`init` only "
                "configures it)"
            )

        key = (settings.dsn, settings.schema, namespace, palace.id, collection_name)
        from mempalace_pg.db.pool import Database

        db = Database.get(settings)
        with self._lock:
            known = self._known.get(key)
        if known is None:
            known = self._lookup(db, namespace, palace.id, collection_name, create)
            if known is None:
                if marker is not None or not palace.local_path:
                    raise CollectionNotInitializedError(collection_name)
                raise PalaceNotFoundError(palace.local_path)
            with self._lock:
                self._known[key] = known
        if create and palace.local_path and marker is None:
            self._write_marker(palace.local_path, target)
        collection = PostgresCollection(
            backend=self,
            db=db,
            palace=palace,
            namespace=namespace,
            name=collection_name,
            collection_pk=known[0],
            dimension=known[1],
            read_only=read_only,
        )
        with self._lock:
            self._open_collections.setdefault(palace.id, []).append(collection)
            # keep the list from growing without bound in long-lived MCP servers
            if len(self._open_collections[palace.id]) > 64:
                self._open_collections[palace.id] = self._open_collections[palace.id][-32:]
        return collection

    def close_palace(self, palace) -> None:
        palace_id = storable(palace.id if isinstance(palace, PalaceRef) else str(palace))
        with self._lock:
            collections = self._open_collections.pop(palace_id, [])
            for key in [k for k in self._known if k[3] == palace_id]:
                del self._known[key]
        for collection in collections:
            collection.close()

    def close(self) -> None:
        """Close this backend's collections. The process-wide pool stays open for other users of it."""
        with self._lock:
            self._closed = True
            collections = [c for cols in self._open_collections.values() for c in cols]
            self._open_collections.clear()
            self._known.clear()
        for collection in collections:
            collection.close()

    def health(self, palace: Optional[PalaceRef] = None) -> HealthStatus:
        if self._closed:
            return HealthStatus.unhealthy("backend closed")
        try:
            from mempalace_pg.db.pool import Database

            settings = Settings.load()
            db = Database.get(settings)
            db.run(lambda conn: conn.execute("SELECT 1").fetchone())
        except Exception as exc:  # reported, not raised
            return HealthStatus.unhealthy(str(exc))
        if palace is not None and palace.local_path and not os.path.isfile(marker_path(palace.local_path)):
            return HealthStatus.unhealthy(f"no {MARKER_FILENAME} in {palace.local_path}")
        return HealthStatus.healthy(f"PostgreSQL at {settings.redacted_dsn}, schema {settings.schema}")

    # -- internals --------------------------------------------------------------------------------
    @staticmethod
    def _target(settings: Settings, namespace: str, palace: PalaceRef) -> dict:
        target = dsn_target(settings.dsn)
        target.update({"schema": settings.schema, "namespace": namespace, "palace_key": palace.id})
        return target

    @staticmethod
    def _check_marker(marker: dict, target: dict, palace: PalaceRef, settings: Settings) -> None:
        from mempalace_pg.db.pool import holds_palace

        check_same_target(
            palace.local_path,
            recorded_target(marker, palace.local_path),
            target,
            ("host", "port", "dbname", "schema", "namespace", "palace_key"),
            "Set MEMPALACE_PG_DSN / MEMPALACE_PG_SCHEMA / MEMPALACE_PG_NAMESPACE "
            "(or the postgres_* keys in config.json) back, or use a fresh palace directory.",
            lambda recorded: holds_palace(settings, recorded),
        )

    @staticmethod
    def _write_marker(palace_dir: str, target: dict) -> None:
        os.makedirs(palace_dir, exist_ok=True)
        marker = {
            "backend": BACKEND_NAME,
            "format": MARKER_FORMAT,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "postgres": target,
        }
        # atomic: a concurrent reader sees the old file or the new one
        with write_atomically(marker_path(palace_dir)) as f:
            json.dump(marker, f, indent=2, ensure_ascii=False)
            f.write("\n")

    @staticmethod
    def _lookup(
        db, namespace: str, palace_key: str, collection_name: str, create: bool
    ) -> Optional[tuple[int, Optional[int]]]:
        """(collection_pk, dimension) of a collection; created with its palace and partition if asked."""
        find = sql.SQL(
            "SELECT c.collection_pk, c.dimension FROM {c} c JOIN {p} p USING (palace_pk) "
            "WHERE p.namespace = %s AND p.palace_key = %s AND c.name = %s"
        ).format(c=db.ident("collections"), p=db.ident("palaces"))
        args = (namespace, palace_key, collection_name)
        row = db.run(lambda conn: conn.execute(find, args).fetchone())
        if row is not None or not create:
            return (row[0], row[1]) if row else None

        def make(conn):
            # One creator at a time per collection; a second one finds the first one's rows.
            locks.xact_lock(conn, locks.creation_key(db.schema, namespace, palace_key, collection_name))
            found = conn.execute(find, args).fetchone()
            if found:
                return found[0], found[1]
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (namespace, palace_key) VALUES (%s, %s) ON CONFLICT DO NOTHING"
                ).format(db.ident("palaces")),
                (namespace, palace_key),
            )
            pk = conn.execute(
                sql.SQL(
                    "INSERT INTO {c} (palace_pk, name) SELECT palace_pk, %s FROM {p} "
                    "WHERE namespace = %s AND palace_key = %s RETURNING collection_pk"
                ).format(c=db.ident("collections"), p=db.ident("palaces")),
                (collection_name, namespace, palace_key),
            ).fetchone()[0]
            # toast_tuple_target: rows up to a page stay whole and uncompressed, so the embedding is
            # read in place (pgvector stores vectors EXTERNAL: a >2 kB drawer row would otherwise
            # move its vector out of line, and every exact distance would cost a TOAST lookup).
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} PARTITION OF {} FOR VALUES IN ({}) WITH (toast_tuple_target = 8160)"
                ).format(db.records(pk), db.ident("records"), sql.Literal(int(pk)))
            )
            conn.execute(
                sql.SQL("SELECT {}(%s::regclass)").format(db.ident("records_partition_setup")),
                (f"{db.schema}.{records_table(pk)}",),
            )
            conn.execute(
                sql.SQL("COMMENT ON TABLE {} IS {}").format(
                    db.records(pk),
                    sql.Literal(f"Records of collection {collection_name} of palace {palace_key}"),
                )
            )
            return pk, None

        return db.run(make, atomic=True)


def existing_collections(
    backend, palace, options: Optional[dict] = None, *, settings: Optional[Settings] = None
) -> dict:
    """``{name: collection}`` of the MemPalace collections ``palace`` already has in ``backend`` (any
    MemPalace backend, given MemPalace's ``options``; a :class:`PostgresBackend` given ``settings``),
    opened without creating any."""
    from mempalace.backends.base import CollectionNotInitializedError

    out = {}
    for name in COLLECTIONS:
        try:
            if settings is not None:
                out[name] = backend.open_collection(settings, palace=palace, collection_name=name)
            else:
                out[name] = backend.get_collection(
                    palace=palace, collection_name=name, create=False, options=options
                )
        except CollectionNotInitializedError:
            continue
    return out


__all__ = [
    "MARKER_FORMAT",
    "PostgresBackend",
    "existing_collections",
]
