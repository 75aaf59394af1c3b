"""Filing a memory atomically: a drawer and the facts drawn from it, in one transaction.

The drawer is the one MemPalace's ``mempalace_add_drawer`` would file for the same wing, room and
content: the same id (``make_drawer_id_from_content``), the same metadata, and content above
MemPalace's ``chunk_size`` split into the same ``<id>_chunk_NNNNNN`` drawers. Each fact names that
drawer (the first chunk, when split) as its ``source_drawer_id``.

Order of work, and why:

1. every argument is checked first (names, dates, the facts' shape), so nothing is embedded for a call
   that cannot succeed; only a fact whose ``valid_to`` precedes its ``valid_from`` is left to the
   graph's own check, inside the transaction;
2. the drawer's text is embedded *before* the transaction opens, so a slow embedder holds no lock;
3. one :func:`~mempalace_pg.atomic.unit_of_work`: the drawer is inserted unless the palace already
   holds it (a drawer is never rewritten: its id is a hash of its wing, room and content), then each
   fact is added; any error rolls all of it back, and the caller is told which fact failed and that
   nothing was filed.

Filing is safe to repeat. A re-filing (the same content again, or a retry) stores no second drawer and
none of the facts already drawn from that drawer (same predicate, object and validity); an identical
*open* fact known from elsewhere is not stored twice either (MemPalace's rule), and keeps the evidence
it had: each fact in the answer says where its evidence is (``source_drawer_id``) and whether this call
stored it (``new``). So a lost connection, a deadlock or a serialization failure makes the whole filing
run once more on a fresh connection.

Concurrent callers are safe: a filing locks the entities its facts name before anything else, in the
one order every graph writer uses (docs/architecture.md, "Lock order"), so callers sharing entities
queue on them and never deadlock; of two callers filing the same content, the second waits, then finds
the drawer and its facts; identical open facts are stored once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

import psycopg

from mempalace_pg.config import Settings
from mempalace_pg.mcp_tools.arguments import ToolInputError, date, entity_name, name
from mempalace_pg.mcp_tools.embedding import document_vectors

log = logging.getLogger(__name__)

#: A memory filed in one call carries at most this many facts (one transaction; an AI that has more
#: files them in several memories).
MAX_FACTS = 100


@dataclass(frozen=True)
class Fact:
    subject: str
    predicate: str
    object: str
    valid_from: Optional[str]
    valid_to: Optional[str]


@dataclass(frozen=True)
class Memory:
    wing: str
    room: str
    content: str
    facts: tuple[Fact, ...]
    source_file: Optional[str]
    added_by: str

    @classmethod
    def checked(cls, *, wing, room, content, facts, source_file, added_by) -> "Memory":
        """A memory from a tool call's arguments, each checked as MemPalace's add_drawer and kg_add
        check theirs."""
        from mempalace.config import sanitize_content, strip_lone_surrogates

        wing, room = name(wing, "wing"), name(room, "room")
        try:
            content = sanitize_content(content)
        except ValueError as exc:
            raise ToolInputError(str(exc)) from None
        if source_file is not None and not isinstance(source_file, str):
            raise ToolInputError("source_file must be a string")
        if not isinstance(added_by, str) or not added_by.strip():
            raise ToolInputError("added_by must be a non-empty string")
        if facts is None:
            facts = []
        if not isinstance(facts, list):
            raise ToolInputError("facts must be a list of {subject, predicate, object} objects")
        if len(facts) > MAX_FACTS:
            raise ToolInputError(f"facts holds {len(facts)} facts; file at most {MAX_FACTS} per memory")
        return cls(
            wing=wing,
            room=room,
            content=content,
            facts=tuple(_fact(i, f) for i, f in enumerate(facts)),
            source_file=strip_lone_surrogates(source_file) if source_file else None,
            added_by=strip_lone_surrogates(added_by),
        )


def _fact(index: int, fact: Any) -> Fact:
    where = f"facts[{index}]"
    if not isinstance(fact, dict):
        raise ToolInputError(f"{where} must be an object with subject, predicate and object")
    unknown = set(fact) - {"subject", "predicate", "object", "valid_from", "valid_to"}
    if unknown:
        raise ToolInputError(
            f"{where} has unknown field(s) {', '.join(sorted(unknown))}; a fact takes subject, predicate, "
            "object, valid_from and valid_to"
        )
    return Fact(
        subject=entity_name(fact.get("subject"), f"{where}.subject"),
        predicate=name(fact.get("predicate"), f"{where}.predicate"),
        object=entity_name(fact.get("object"), f"{where}.object"),
        valid_from=date(fact.get("valid_from"), f"{where}.valid_from"),
        valid_to=date(fact.get("valid_to"), f"{where}.valid_to"),
    )


def drawers_of(memory: Memory) -> tuple[str, list[str], list[str], list[dict]]:
    """(logical drawer id, physical ids, documents, metadatas) as mempalace_add_drawer makes them."""
    from mempalace.config import MempalaceConfig
    from mempalace.ids import ID_RECIPE, make_drawer_id_from_content
    from mempalace.source_identity import identity_metadata

    drawer_id = make_drawer_id_from_content(memory.wing, memory.room, memory.content)
    filed_at = datetime.now().isoformat()
    base = {
        "wing": memory.wing,
        "room": memory.room,
        "source_file": memory.source_file or "",
        "added_by": memory.added_by,
        "filed_at": filed_at,
        "id_recipe": ID_RECIPE,
    }
    if memory.source_file:
        base.update(identity_metadata(memory.source_file))
    base["last_modified"] = filed_at
    size = MempalaceConfig().chunk_size
    if len(memory.content) <= size:
        return drawer_id, [drawer_id], [memory.content], [{**base, "chunk_index": 0}]
    ids, documents, metadatas = [], [], []
    for start in range(0, len(memory.content), size):
        index = start // size
        ids.append(f"{drawer_id}_chunk_{index:06d}")
        documents.append(memory.content[start : start + size])
        metadatas.append({**base, "chunk_index": index, "parent_drawer_id": drawer_id})
    return drawer_id, ids, documents, metadatas


#: Errors after which the whole filing is run again once: a lost connection (a restarted server, a
#: terminated backend) and the two that PostgreSQL asks a client to retry. A filing is safe to replay:
#: its drawer id is a hash of its content, and a replay skips the facts already filed with it.
_RETRIED = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.SerializationFailure,
)


def file(memory: Memory, *, palace_path: str, facts_of, settings: Optional[Settings] = None) -> dict:
    """File ``memory`` in the palace at ``palace_path``: all of it, or (raising) nothing.

    ``facts_of(subject)`` lists the stored facts with ``subject`` as their subject (``triple_id``,
    ``predicate``, ``object``, ``valid_from``, ``valid_to``, ``source_drawer_id``: what
    :meth:`~mempalace_pg.retrieval.PalaceSearch.facts_with_evidence` gives): it tells a re-filing which
    facts it already stored and each answer where its fact's evidence is.
    """
    drawer_id, ids, documents, metadatas = drawers_of(memory)
    embeddings = document_vectors(documents, metadatas)
    for attempt in (1, 2):
        try:
            existed, triple_ids, created = _file_once(
                memory,
                ids=ids,
                documents=documents,
                metadatas=metadatas,
                embeddings=embeddings,
                palace_path=palace_path,
                settings=settings,
                facts_of=facts_of,
            )
            break
        except _RETRIED as exc:
            if not _worth_retrying(exc):
                raise
            if attempt == 2:
                raise ToolInputError(
                    f"the database connection failed twice ({type(exc).__name__}); the memory was not "
                    "filed, unless the failure came as it committed: filing it again is safe (the same "
                    "drawer, no second copy of its facts)"
                ) from None
            log.info("pg_file_memory: %s; filing again once", type(exc).__name__)
    stored = _stored_facts(memory, triple_ids, facts_of)
    return {
        "success": True,
        "drawer_id": drawer_id,
        "drawer_ids": ids,
        "drawer": "already_exists" if existed else "filed",
        "wing": memory.wing,
        "room": memory.room,
        "chunks": len(ids),
        "facts": [
            {
                "triple_id": t,
                **_fact_dict(f),
                **stored.get(t, {}),
                # add_triple hands back an identical open fact it already held: not new, its own evidence
                "new": t in created and stored.get(t, {}).get("source_drawer_id") == ids[0],
            }
            for f, t in zip(memory.facts, triple_ids)
        ],
    }


def _worth_retrying(exc: Exception) -> bool:
    """A lost connection, a deadlock or a serialization failure: yes. A statement that failed on a live
    connection (a timeout, a resource limit): no, it would fail again."""
    if isinstance(exc, (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)):
        return True
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


def _file_once(memory, *, ids, documents, metadatas, embeddings, palace_path, settings, facts_of):
    """One transaction: the drawer if absent, then the facts. Returns (the drawer existed, each fact's
    triple id, the ids of the facts this transaction stored)."""
    from mempalace_pg.atomic import unit_of_work
    from mempalace_pg.graph.values import entity_id_of, predicate_key

    results = []
    created = set()
    # The memory's entities are known up front: the unit locks just those, in the one order every
    # writer uses, so filings that share entities queue on them instead of deadlocking.
    names = {f.subject for f in memory.facts} | {f.object for f in memory.facts}
    with unit_of_work(palace_path, settings=settings, entities=names) as uow:
        # All of a memory's drawers are written in one statement, so all exist or none does. A second
        # caller filing the same content waits here for the first's commit, then finds it.
        existed = not uow.add_drawers(
            ids=ids, documents=documents, embeddings=embeddings, metadatas=metadatas, if_absent=True
        )
        # A re-filing (a retry, or the same memory filed twice) stores none of the facts it already
        # stored: those drawn from this drawer with the same predicate, object and validity.
        earlier = {}
        if existed:
            for subject in {f.subject for f in memory.facts}:
                for row in facts_of(subject):
                    if row.get("source_drawer_id") == ids[0]:
                        key = (
                            entity_id_of(subject),
                            row["predicate"],
                            entity_id_of(row["object"]),
                            row.get("valid_from"),
                            row.get("valid_to"),
                        )
                        earlier.setdefault(key, row["triple_id"])
        for i, fact in enumerate(memory.facts):
            key = (
                entity_id_of(fact.subject),
                predicate_key(fact.predicate),
                entity_id_of(fact.object),
                fact.valid_from,
                fact.valid_to,
            )
            if key in earlier:
                results.append(earlier[key])
                continue
            try:
                triple_id = uow.add_triple(
                    fact.subject,
                    fact.predicate,
                    fact.object,
                    valid_from=fact.valid_from,
                    valid_to=fact.valid_to,
                    source_file=memory.source_file,
                    source_drawer_id=ids[0],
                )
            except ValueError as exc:
                raise ToolInputError(
                    f"facts[{i}]: {exc}; nothing was filed (the drawer and the facts before it were "
                    "rolled back)"
                ) from None
            earlier.setdefault(key, triple_id)  # the same fact twice in one call is stored once
            results.append(triple_id)
            created.add(triple_id)
    return existed, results, created


def _stored_facts(memory: Memory, triple_ids, facts_of) -> dict:
    """triple id -> where its evidence is, as stored (read after the commit): an identical open fact
    known before keeps its own drawer, which may not be this memory's."""
    wanted = set(triple_ids)
    stored = {}
    for subject in {f.subject for f in memory.facts}:
        for row in facts_of(subject):
            if row.get("triple_id") in wanted:
                stored[row["triple_id"]] = {"source_drawer_id": row.get("source_drawer_id")}
    return stored


def _fact_dict(fact: Fact) -> dict:
    return {
        "subject": fact.subject,
        "predicate": fact.predicate,
        "object": fact.object,
        "valid_from": fact.valid_from,
        "valid_to": fact.valid_to,
    }


__all__ = ["Memory", "Fact", "MAX_FACTS", "drawers_of", "file"]
