"""A unit of work on one palace: drawers and knowledge-graph facts in one transaction.

    from mempalace_pg import unit_of_work

    with unit_of_work(palace_path="~/.mempalace/palace") as uow:
        uow.add_drawers(ids=["d1"], documents=["Alice moved to Lisbon in May."],
                        metadatas=[{"wing": "people", "room": "alice"}], embeddings=[vector])
        uow.add_triple("Alice", "lives_in", "Lisbon", valid_from="2026-05-01", source_drawer_id="d1")
    # committed: the drawer and the fact are visible together, or (on any exception) neither is

Everything runs on one pooled connection inside one transaction. ``uow.kg`` is the palace's full
knowledge graph (MemPalace's ``KnowledgeGraph`` surface) bound to that transaction, so its reads see
the unit's own uncommitted writes; ``uow.connection`` is there for raw SQL in the same transaction.

The link rule: a fact added here that names ``source_drawer_id`` must name a drawer of this palace
that exists in this transaction (added earlier in the unit, or already stored); otherwise
``ValueError`` (and, if you let it propagate, the unit rolls back). Deleting a drawer keeps the facts
drawn from it and stamps them ``source_drawer_deleted_at`` (sql/0003_graph_and_drawers.sql).

Writers of one palace never deadlock on the graph (docs/architecture.md, "Lock order"): a unit takes
its graph's locks first, as it opens. By default that is the palace's whole graph, so concurrent units
that write facts queue for it one after the other (their drawers' rows aside). A unit that knows the
entities its facts will name says so, ``unit_of_work(..., entities=["Alice", "Lisbon"])``, and then
locks only those: units on other entities run side by side. A fact naming an entity left out of that
list is refused (``ValueError``), since taking its lock late could deadlock.

A unit is not retried when the connection drops (your code between the writes cannot be replayed):
the error propagates and nothing is committed.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Iterator, Optional

import psycopg
from mempalace.backends.base import PalaceRef
from psycopg import sql

from mempalace_pg.config import Settings
from mempalace_pg.engine import backlog
from mempalace_pg.graph.kg import AgeKnowledgeGraph
from mempalace_pg.graph.values import entity_id_of
from mempalace_pg.store.collection import DRAWERS_COLLECTION, PostgresCollection
from mempalace_pg.store.records import clean_batch
from mempalace_pg.text import storable


class UnitOfWork:
    """Writes to one palace's drawers and knowledge graph inside one open transaction.

    Obtain it from :func:`unit_of_work`; it is valid only inside that ``with`` block.
    """

    def __init__(
        self,
        drawers: PostgresCollection,
        kg: AgeKnowledgeGraph,
        conn: psycopg.Connection,
        entities: Optional[frozenset] = None,
    ):
        self.drawers = drawers
        self.kg = kg
        self.connection = conn
        self._written = 0
        self._entities = entities  # the entity ids this unit locked; None: the whole graph
        self._exists = sql.SQL(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE collection_pk = %(pk)s AND id = %(id)s)"
        ).format(drawers.partition.table)

    @property
    def drawers_written(self) -> int:
        """How many drawers this unit of work has written so far."""
        return self._written

    # -- drawers -----------------------------------------------------------------------------------
    def add_drawers(
        self, *, ids, documents, embeddings, metadatas=None, replace: bool = False, if_absent: bool = False
    ) -> int:
        """Write drawers (validated first: nothing of a bad batch is written) and return how many were
        written. ``replace=False`` is ``add``: an existing id fails the unit, or with ``if_absent``
        writes nothing of the batch and returns 0 (a concurrent unit adding the same ids is waited
        for); ``replace=True`` is ``upsert``."""
        part = self.drawers.partition
        batch = clean_batch(ids, documents, metadatas, embeddings)
        ids, documents, metas, matrix = batch.ids, batch.documents, batch.metadatas, batch.matrix
        if not ids:
            return 0
        dim = batch.dimension
        part.check_dimension(dim)
        part.dimension = part.claim_width(self.connection, dim)
        try:
            with self.connection.transaction():  # a savepoint: the error below leaves the unit usable
                part.write_rows(self.connection, ids, documents, metas, matrix, replace=replace)
        except psycopg.errors.UniqueViolation:
            if if_absent:
                return 0
            raise ValueError(
                f"drawer ids already exist in this palace ({ids[:5]}...); nothing of this "
                "batch was written (use replace=True to overwrite)"
            ) from None
        self._written += len(ids)
        return len(ids)

    def has_drawer(self, drawer_id: str) -> bool:
        """Whether the palace holds a drawer with this id, as this transaction sees it."""
        found = self.connection.execute(
            self._exists, {"pk": self.drawers.partition.pk, "id": storable(drawer_id)}
        ).fetchone()[0]
        return bool(found)

    def delete_drawers(self, ids) -> None:
        """Delete drawers by id; facts drawn from them are kept and stamped (see the module doc)."""
        statement = self.drawers.partition.delete_sql(ids=ids)
        if statement is not None:
            self.connection.execute(*statement)

    # -- facts -----------------------------------------------------------------------------------------
    def _check_locked(self, *names: str) -> None:
        if self._entities is None:
            return
        for name in names:
            if isinstance(name, str) and entity_id_of(name) not in self._entities:
                raise ValueError(
                    f"entity {name!r} is not among the entities this unit of work locked; name it in "
                    "unit_of_work(..., entities=[...]), or leave entities out to lock the palace's graph"
                )

    def _check_source(self, source_drawer_id: Optional[str]) -> None:
        if source_drawer_id is None:
            return
        if not isinstance(source_drawer_id, str):
            raise ValueError("source_drawer_id must be a string")
        if not self.has_drawer(source_drawer_id):
            raise ValueError(
                f"source_drawer_id {source_drawer_id!r} is not a drawer of this palace; "
                "add the drawer first (in this unit of work or before it)"
            )

    def add_triple(self, subject: str, predicate: str, obj: str, **kwargs) -> str:
        """MemPalace's ``KnowledgeGraph.add_triple`` in this transaction; ``source_drawer_id`` must
        name a drawer of the palace. Returns the triple id."""
        self._check_locked(subject, obj)
        self._check_source(kwargs.get("source_drawer_id"))
        return self.kg.add_triple(subject, predicate, obj, **kwargs)

    def supersede(self, subject: str, predicate: str, old_obj: str, new_obj: str, **kwargs) -> str:
        """MemPalace's ``KnowledgeGraph.supersede`` in this transaction (same link rule)."""
        self._check_locked(subject, old_obj, new_obj)
        self._check_source(kwargs.get("source_drawer_id"))
        return self.kg.supersede(subject, predicate, old_obj, new_obj, **kwargs)

    def invalidate(self, subject: str, predicate: str, obj: str, ended: Optional[str] = None) -> None:
        self._check_locked(subject, obj)
        self.kg.invalidate(subject, predicate, obj, ended=ended)

    def add_entity(self, name: str, entity_type: str = "unknown", properties: Optional[dict] = None) -> str:
        self._check_locked(name)
        return self.kg.add_entity(name, entity_type, properties)


def open_drawers(
    palace_path: Optional[str] = None,
    *,
    palace_key: Optional[str] = None,
    namespace: Optional[str] = None,
    settings: Optional[Settings] = None,
    create: bool = True,
) -> tuple[PostgresCollection, AgeKnowledgeGraph]:
    """The drawers collection and the knowledge graph of one postgres palace."""
    from mempalace_pg.store.backend import PostgresBackend

    settings = settings or Settings.load()
    kg = AgeKnowledgeGraph(
        palace_path=palace_path, palace_key=palace_key, namespace=namespace, settings=settings
    )
    ref = PalaceRef(id=kg.palace_key, local_path=palace_path, namespace=kg.namespace)
    collection = PostgresBackend().open_collection(
        settings, palace=ref, collection_name=DRAWERS_COLLECTION, create=create
    )
    return collection, kg


@contextmanager
def unit_of_work(
    palace_path: Optional[str] = None,
    *,
    palace_key: Optional[str] = None,
    namespace: Optional[str] = None,
    settings: Optional[Settings] = None,
    entities: Optional[Iterable[str]] = None,
) -> Iterator[UnitOfWork]:
    """Open a unit of work on a postgres palace (by directory, or by ``palace_key``): one pooled
    connection, one transaction, committed when the block ends and rolled back if it raises.

    ``entities``: the names of every entity the unit's facts will name, if known; the unit then locks
    only those, not the palace's whole graph (see the module's docstring)."""
    drawers, kg = open_drawers(palace_path, palace_key=palace_key, namespace=namespace, settings=settings)
    drawers.partition.check_writable()
    kg.palace_pk()
    db = drawers.database()
    with db.transaction() as conn:
        bound = kg.bound_to(conn)
        locked = bound.lock(entities)  # first, before any row: the lock order
        uow = UnitOfWork(drawers, bound, conn, locked)
        yield uow
    if uow.drawers_written:
        backlog.after_write(
            drawers.partition.index, uow.drawers_written, dimension=drawers.partition.dimension
        )


__all__ = ["UnitOfWork", "unit_of_work", "open_drawers"]
