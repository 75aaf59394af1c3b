"""MemPalace's temporal knowledge graph, stored as an Apache AGE graph in the palace's database.

:class:`AgeKnowledgeGraph` has the public surface, return shapes and rules of MemPalace 3.11's
``mempalace.knowledge_graph.KnowledgeGraph`` (the SQLite one); see MemPalace's docstrings for the
semantics. What differs is where it lives:

* entities are ``Entity`` vertices and triples are ``Fact`` edges of the AGE graph ``<schema>_kg``
  (``sql/0002_knowledge_graph.sql`` describes every property), one graph for all palaces of the
  schema, every vertex and edge tagged with its palace;
* every method is one statement on the backend's shared connection pool (so one round trip, and the
  writes one transaction each); writes are the ``kg_*`` SQL functions of that file;
* several processes may write at once: facts on the same (subject, predicate, object) are
  serialized in the database, so concurrent ``add_triple`` calls leave one open fact.

Text is stored as the drawers store it (NUL stripped, lone surrogates replaced: see
:mod:`mempalace_pg.text`), at any length. One deliberate difference, on input MemPalace's SQLite graph
would store silently: a non-numeric or non-finite confidence raises ``ValueError``. ``_conn()`` (raw
SQLite access) returns a read-only SQLite snapshot of the graph; ``mempalace kg normalize`` and
``mempalace audit`` read this graph through :mod:`mempalace_pg.hooks` instead.

MemPalace constructs ``KnowledgeGraph(db_path=...)`` itself; :mod:`mempalace_pg.graph.routing` hands it
this class for palaces on the ``postgres`` backend.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import date, datetime
from typing import Any, Iterable, Optional

import psycopg

from mempalace_pg.config import Settings
from mempalace_pg.db.sqlkit import clamped_row_count
from mempalace_pg.errors import DatabaseUnavailableError
from mempalace_pg.graph.replication import Replication
from mempalace_pg.graph.statements import statements
from mempalace_pg.graph.values import (
    boundary_of,
    checked_text,
    end_key,
    entity_id_of,
    fact_row,
    mempalace_helpers,
    name_tokens,
    predicate_key,
    provenance,
    start_key,
)

#: Raised by the kg_* SQL functions for bad input (an interval that would end before it starts).
_BAD_INPUT_SQLSTATE = "MPKG1"

_MIN_ENTITY_CANDIDATE_LEN = 3


def fact_names(subject: str, predicate: str, **objects: str) -> tuple[str, str, tuple[str, ...]]:
    """A fact's subject, predicate and object(s) (by the field name an error names), each checked as
    every write checks them: text PostgreSQL can hold, and not empty."""
    return (
        checked_text(subject, "subject", required=True),
        checked_text(predicate, "predicate", required=True),
        tuple(checked_text(value, field, required=True) for field, value in objects.items()),
    )


def new_triple_id(make_triple_id, sub_id: str, pred: str, obj_id: str, start: Optional[str]) -> str:
    """A new fact's id, made as MemPalace makes it (``make_triple_id``, its helper): from the fact and the
    moment it is written."""
    return make_triple_id(sub_id, pred, obj_id, start, datetime.now().isoformat())


class AgeKnowledgeGraph(Replication):
    """A palace's knowledge graph in Apache AGE, with MemPalace's ``KnowledgeGraph`` interface.

    Build it with the palace directory (its ``mempalace_pg.json`` marker names the database), or,
    for a palace without a directory, with ``palace_key`` (and ``namespace``)::

        kg = AgeKnowledgeGraph(palace_path="~/.mempalace/palace")
        kg.add_triple("Max", "child_of", "Alice", valid_from="2015-04-01")
        kg.query_entity("Max", as_of="2026-01-15")

    Construction does no I/O beyond reading the marker; the first call connects.
    """

    def __init__(
        self,
        db_path: Optional[str] = None,
        *,
        palace_path: Optional[str] = None,
        palace_key: Optional[str] = None,
        namespace: Optional[str] = None,
        settings: Optional[Settings] = None,
    ):
        self.db_path = db_path
        self.palace_path = palace_path
        self._settings = settings or Settings.load()
        if palace_path is not None:
            from mempalace_pg.db.pool import holds_palace
            from mempalace_pg.marker import check_marker_target

            namespace, palace_key = check_marker_target(
                palace_path, self._settings, lambda recorded: holds_palace(self._settings, recorded)
            )
        if not palace_key:
            raise ValueError("AgeKnowledgeGraph needs palace_path= (a postgres palace) or palace_key=")
        self.palace_key = palace_key
        self.namespace = self._settings.namespace if namespace is None else namespace
        self._schema = self._settings.schema
        self.graph_name = self._settings.graph
        self._sql = statements(self._schema, self.graph_name)
        self._lock = threading.RLock()  # MemPalace callers hold it around _conn(), which may connect
        self._db = None
        self._palace_pk: Optional[int] = None
        self._bound: Optional[psycopg.Connection] = None
        self._connection: Optional[sqlite3.Connection] = None  # a _conn() snapshot, as MemPalace names it

    def bound_to(self, conn: psycopg.Connection) -> "AgeKnowledgeGraph":
        """A copy of this graph whose every call runs on ``conn`` (a unit of work's connection, in
        its transaction) instead of taking one from the pool."""
        import copy

        self.palace_pk()  # resolve the palace first, on a pooled connection of its own
        bound = copy.copy(self)
        bound._bound = conn
        bound._lock = threading.RLock()
        bound._connection = None
        return bound

    @property
    def settings(self) -> Settings:
        """The settings this graph was opened with (its schema, graph name, pool)."""
        return self._settings

    # -- connection management ----------------------------------------------------------------
    def database(self):
        """The palace's database (its pool), opened on first use."""
        db = self._db
        if db is not None:
            return db
        from mempalace_pg.db.pool import Database

        with self._lock:
            if self._db is None:
                self._db = Database.get(self._settings)
            return self._db

    def palace_pk(self) -> int:
        """The palace's key in the schema's ``palaces`` table (created on first use unless read-only)."""
        if self._palace_pk is not None:
            return self._palace_pk
        # Kept on the Database, for every graph of this palace in the process (MemPalace's Hermes
        # integration builds a KnowledgeGraph per call; that must stay cheap), and gone with it.
        db = self.database()
        known = db.kept("palace keys", dict)
        key = (self.namespace, self.palace_key)
        pk = known.get(key)
        if pk is None:
            find, make = self._sql.find_palace, self._sql.make_palace
            params = {"namespace": self.namespace, "palace_key": self.palace_key}

            def resolve(conn):
                row = conn.execute(find, params).fetchone()
                if row is None:
                    conn.execute(make, params)
                    row = conn.execute(find, params).fetchone()
                return row[0]

            pk = known.setdefault(key, db.run(resolve))
        self._palace_pk = pk
        return pk

    def run(self, work, *, atomic: bool = False):
        """Run ``work(conn, palace_pk)``; bad-input errors raised in SQL become ValueError.

        On a graph bound to a unit of work (:meth:`bound_to`) it runs on that connection, inside the
        unit's transaction (a failed statement then fails the whole unit)."""
        palace = self.palace_pk()
        try:
            if self._bound is not None:
                return work(self._bound, palace)
            return self.database().run(lambda conn: work(conn, palace), atomic=atomic)
        except psycopg.Error as exc:
            if getattr(exc, "sqlstate", None) == _BAD_INPUT_SQLSTATE:
                raise ValueError(exc.diag.message_primary) from None
            if isinstance(exc, psycopg.errors.UndefinedTable):
                raise DatabaseUnavailableError(
                    f"the knowledge graph tables are missing in schema {self._schema!r} "
                    f"(graph {self.graph_name!r}): run `mempalace-pg db upgrade`"
                ) from None
            raise

    def _one(self, query: str, **params) -> Any:
        return self.run(lambda conn, palace: conn.execute(query, {"palace": palace, **params}).fetchone())

    def _all(self, query: str, **params) -> list:
        return self.run(lambda conn, palace: conn.execute(query, {"palace": palace, **params}).fetchall())

    def close(self) -> None:
        """Release this object's hold on the pool (and close a :meth:`_conn` snapshot). Idempotent;
        the next call reconnects."""
        with self._lock:
            self._db = None
            self._palace_pk = None
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    def _entity_id(self, name: str) -> str:
        return entity_id_of(name)

    # -- writes -------------------------------------------------------------------------------
    def lock_statement(self, entities: Optional[Iterable[str]] = None) -> tuple[str, dict]:
        """The statement that locks, until the caller's transaction ends, the graph writes of that
        transaction (sql/0015_lock_order.sql): the entities named by ``entities`` (names, as facts
        name them), or with None this palace's whole graph. Taken first in a transaction, before its
        drawers, it keeps concurrent writers from deadlocking on the entities they share. The
        statement's ``%(palace)s`` is this palace's key (:meth:`palace_pk`)."""
        if entities is None:
            return self._sql.lock_graph, {}
        keys = sorted({entity_id_of(checked_text(n, "entity", required=True)) for n in entities})
        return self._sql.lock_entities, {"keys": keys}

    def lock(self, entities: Optional[Iterable[str]] = None) -> Optional[frozenset]:
        """Run :meth:`lock_statement` in the transaction this graph is in: a graph bound to a unit of
        work, or any graph inside its database's ``held()`` block (outside a transaction the locks
        would end with the statement). Returns the entity ids locked, or None for the whole graph."""
        query, params = self.lock_statement(entities)
        self.run(lambda conn, palace: conn.execute(query, {"palace": palace, **params}))
        return None if entities is None else frozenset(params["keys"])

    def add_entity(self, name: str, entity_type: str = "unknown", properties: dict = None) -> str:
        """Add or replace an entity (MemPalace: INSERT OR REPLACE). Returns its id."""
        name = checked_text(name, "name", required=True)
        eid = entity_id_of(name)
        attributes = checked_text(json.dumps(properties or {}), "properties")
        entity_type = checked_text(entity_type, "entity_type")
        self._one(self._sql.add_entity, eid=eid, name=name, type=entity_type, attributes=attributes)
        return eid

    def add_triple(
        self,
        subject: str,
        predicate: str,
        obj: str,
        valid_from: str = None,
        valid_to: str = None,
        confidence: float = 1.0,
        source_closet: str = None,
        source_file: str = None,
        source_drawer_id: str = None,
        adapter_name: str = None,
    ) -> str:
        """Add subject -> predicate -> object; an identical open fact is returned, not duplicated."""
        _, sanitize, make_triple_id = mempalace_helpers()
        valid_from = sanitize(valid_from, "valid_from")
        valid_to = sanitize(valid_to, "valid_to")
        if valid_from is not None and valid_to is not None and end_key(valid_to) < start_key(valid_from):
            raise ValueError(
                f"valid_to={valid_to!r} is before valid_from={valid_from!r}; "
                "an inverted interval would be invisible to every KG query"
            )
        subject, predicate, (obj,) = fact_names(subject, predicate, object=obj)
        sub_id, obj_id, pred = entity_id_of(subject), entity_id_of(obj), predicate_key(predicate)
        triple_id = new_triple_id(make_triple_id, sub_id, pred, obj_id, valid_from)
        return self._one(
            self._sql.add_triple,
            sub=sub_id,
            sub_name=subject,
            pred=pred,
            obj=obj_id,
            obj_name=obj,
            triple_id=triple_id,
            valid_from=valid_from,
            valid_to=valid_to,
            **provenance(confidence, source_closet, source_file, source_drawer_id, adapter_name),
        )[0]

    def link_evidence(self, triple_ids: list, drawer_id: str) -> int:
        """Give the facts among ``triple_ids`` that name no source drawer ``drawer_id`` as their evidence
        (facts that name one keep it). Returns how many facts were linked."""
        ids = [checked_text(t, "triple_id", required=True) for t in triple_ids]
        drawer_id = checked_text(drawer_id, "drawer_id", required=True)
        if not ids:
            return 0
        query = self._sql.link_evidence
        return self.run(
            lambda conn, palace: (
                conn.execute(query, {"palace": palace, "triple_ids": ids, "drawer": drawer_id}).rowcount
            )
        )

    def invalidate(self, subject: str, predicate: str, obj: str, ended: str = None) -> None:
        """Close every open (subject, predicate, object) fact at ``ended`` (default: today)."""
        _, sanitize, _ = mempalace_helpers()
        subject, predicate, (obj,) = fact_names(subject, predicate, object=obj)
        ended = sanitize(ended or date.today().isoformat(), "ended")
        self._one(
            self._sql.invalidate,
            sub=entity_id_of(subject),
            pred=predicate_key(predicate),
            obj=entity_id_of(obj),
            ended=ended,
        )

    def supersede(
        self,
        subject: str,
        predicate: str,
        old_obj: str,
        new_obj: str,
        at: str = None,
        confidence: float = 1.0,
        source_closet: str = None,
        source_file: str = None,
        source_drawer_id: str = None,
        adapter_name: str = None,
    ) -> str:
        """Close (subject, predicate, old_obj) and open (subject, predicate, new_obj) at one instant."""
        _, _, make_triple_id = mempalace_helpers()
        boundary = boundary_of(at)
        subject, predicate, (old_obj, new_obj) = fact_names(
            subject, predicate, old_obj=old_obj, new_obj=new_obj
        )
        sub_id, old_id, new_id = entity_id_of(subject), entity_id_of(old_obj), entity_id_of(new_obj)
        pred = predicate_key(predicate)
        triple_id = new_triple_id(make_triple_id, sub_id, pred, new_id, boundary)
        return self._one(
            self._sql.supersede,
            sub=sub_id,
            sub_name=subject,
            pred=pred,
            old=old_id,
            new=new_id,
            new_name=new_obj,
            at=boundary,
            triple_id=triple_id,
            **provenance(confidence, source_closet, source_file, source_drawer_id, adapter_name),
        )[0]

    def rewrite(
        self, triple_id: str, predicate: str, obj: str, at: str = None, source_file: str = None
    ) -> Optional[str]:
        """Close open fact ``triple_id`` and open its rewording; None if it is no longer open."""
        _, _, make_triple_id = mempalace_helpers()
        boundary = boundary_of(at)
        pred = predicate_key(checked_text(str(predicate), "predicate", required=True))
        obj = checked_text(obj, "object", required=True)
        obj_id = entity_id_of(obj)
        triple_id = checked_text(triple_id, "triple_id", required=True)
        # The successor id needs the subject, which only the database knows: name it after the
        # rewritten fact's subject, taken from its id (t_<subject>_<predicate>_<object>_<hash>).
        subject = self._one(self._sql.subject_of, triple_id=triple_id)
        if subject is None:
            return None
        new_id = new_triple_id(make_triple_id, subject[0], pred, obj_id, boundary)
        return self._one(
            self._sql.rewrite,
            old_triple_id=triple_id,
            pred=pred,
            obj=obj_id,
            obj_name=obj,
            at=boundary,
            triple_id=new_id,
            source_file=checked_text(source_file, "source_file"),
        )[0]

    # -- reads --------------------------------------------------------------------------------
    def query_entity(self, name: str, as_of: str = None, direction: str = "outgoing") -> list:
        """Facts about an entity: outgoing, incoming or both; only those valid at ``as_of`` if given."""
        _, sanitize, _ = mempalace_helpers()
        as_of = sanitize(as_of, "as_of")
        name = checked_text(name, "name", required=True)
        eid = entity_id_of(name)
        as_of_key = start_key(as_of) if as_of else None
        query = self._sql.query_entity(direction, bool(as_of_key))
        rows = self._all(query, eid=eid, as_of=as_of_key)
        results = [fact_row(name, row) for row in rows]
        if results:
            return results
        # As MemPalace does: an entity that exists but has no facts (valid at as_of) is an empty answer;
        # only an unknown name goes on to the fuzzy search, which costs a token-index search.
        if self._one(self._sql.entity_exists, eid=eid)[0]:
            return results
        candidates = self._candidates(name, eid)
        if len(candidates) == 1:
            cand = candidates[0]
            rows = self._all(query, eid=cand["id"], as_of=as_of_key)
            results = [fact_row(cand["name"], row) for row in rows]
        return results

    def find_entity_candidates(self, name: str) -> list:
        """Entities whose name or id contains ``name`` as a whole token or prefix (never a substring)."""
        if not name or len(name.strip()) < _MIN_ENTITY_CANDIDATE_LEN:
            return []
        name = checked_text(name, "name")
        return self._candidates(name, entity_id_of(name))

    def _candidates(self, name: str, eid: str) -> list:
        """MemPalace's fuzzy candidates for a name: up to 5 entities, in write order, the exact id left
        out."""
        stripped = name.strip() if name else ""
        if len(stripped) < _MIN_ENTITY_CANDIDATE_LEN:
            return []
        kgm = mempalace_helpers().knowledge_graph
        name_esc, id_esc = kgm._escape_like(stripped), kgm._escape_like(eid)
        patterns = (
            f"{name_esc} %",
            f"% {name_esc}",
            f"% {name_esc} %",
            f"{id_esc}\\_%",
            f"%\\_{id_esc}",
            f"%\\_{id_esc}\\_%",
        )
        rows = self._all(
            self._sql.candidates,
            eid=eid,
            name=name,
            name_tokens=name_tokens(stripped, " "),
            id_tokens=name_tokens(eid, "_"),
            **{f"p{i}": pattern for i, pattern in enumerate(patterns)},
        )
        return [{"id": r[0], "name": r[1]} for r in rows if r[0] != eid]

    def query_relationship(self, predicate: str, as_of: str = None) -> list:
        """Every fact with this predicate (valid at ``as_of`` if given)."""
        _, sanitize, _ = mempalace_helpers()
        as_of = sanitize(as_of, "as_of")
        pred = predicate_key(checked_text(predicate, "predicate", required=True))
        as_of_key = start_key(as_of) if as_of else None
        rows = self._all(self._sql.query_relationship(bool(as_of_key)), pred=pred, as_of=as_of_key)
        return [
            {
                "subject": sub,
                "predicate": pred,
                "object": obj,
                "valid_from": vf,
                "valid_to": vt,
                "current": vt is None,
            }
            for sub, obj, _, vf, vt in rows
        ]

    def timeline(self, entity_name: str = None, limit: int = 100, offset: int = 0) -> list:
        """Facts in chronological order (valid_from, byte order, undated last), optionally for one entity."""
        limit, offset = clamped_row_count(limit, 1), clamped_row_count(offset)
        if entity_name:
            entity_name = checked_text(entity_name, "entity_name")
            rows = self._all(self._sql.timeline(True, limit, offset), eid=entity_id_of(entity_name))
        else:
            rows = self._all(self._sql.timeline(False, limit, offset))
        return [
            {
                "subject": sub,
                "predicate": pred,
                "object": obj,
                "valid_from": vf,
                "valid_to": vt,
                "current": vt is None,
            }
            for sub, obj, pred, vf, vt in rows
        ]

    def timeline_total(self, entity_name: str = None) -> int:
        """How many facts a :meth:`timeline` query matches over all pages."""
        if entity_name:
            entity_name = checked_text(entity_name, "entity_name")
            return self._one(self._sql.timeline_total_entity, eid=entity_id_of(entity_name))[0]
        return self._one(self._sql.timeline_total_all)[0]

    def stats(self) -> dict:
        entities, triples, current, predicates = self._one(self._sql.stats)
        return {
            "entities": entities,
            "triples": triples,
            "current_facts": current,
            "expired_facts": triples - current,
            "relationship_types": list(predicates or []),
        }

    def open_facts(self) -> list[dict]:
        """Every open fact (``valid_to`` unset) whose subject and object are entities, as
        ``{"id", "subject", "predicate", "object", "valid_from"}`` by name, in the order MemPalace's
        ``kg normalize`` reads them from SQLite (valid_from, undated first, then predicate, bytewise)."""
        rows = self._all(self._sql.open_facts)
        return [
            {"id": tid, "subject": sub, "predicate": pred, "object": obj, "valid_from": vf}
            for tid, pred, sub, obj, vf in rows
        ]

    def open_predicate_counts(self) -> dict[str, int]:
        """How many open facts use each predicate, most used first (``mempalace audit``'s reuse score)."""
        return {pred: int(n) for pred, n in self._all(self._sql.open_predicate_counts)}

    # -- seeding ------------------------------------------------------------------------------
    def seed_from_entity_facts(self, entity_facts: dict) -> None:
        """Bootstrap from fact_checker-style ENTITY_FACTS (MemPalace's own routine, run on this graph)."""
        kgm = mempalace_helpers().knowledge_graph
        sqlite_class = getattr(kgm, "_SQLITE_KNOWLEDGE_GRAPH", kgm.KnowledgeGraph)
        sqlite_class.seed_from_entity_facts(self, entity_facts)

    def __repr__(self) -> str:
        return (
            f"AgeKnowledgeGraph(graph={self.graph_name!r}, namespace={self.namespace!r}, "
            f"palace_key={self.palace_key!r})"
        )


__all__ = ["fact_names", "new_triple_id", "AgeKnowledgeGraph"]
