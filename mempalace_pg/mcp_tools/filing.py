"""Filing a memory atomically: a drawer and the facts drawn from it, in one transaction.

The drawer is the one MemPalace's ``mempalace_add_drawer`` would file for the same wing, room and
content: the same id (``make_drawer_id_from_content``), the same metadata, and content above
MemPalace's ``chunk_size`` split into the same ``<id>_chunk_NNNNNN`` drawers. Each fact names that
drawer (the first chunk, when split) as its ``source_drawer_id``.

Order of work, and why:

1. every argument is checked (nothing is embedded for a call that cannot succeed);
2. the drawer's text is embedded, *before* the transaction opens, so a slow embedder holds no lock;
3. one :func:`~mempalace_pg.atomic.unit_of_work`: the drawer is inserted unless the palace already
   holds it (a drawer is never rewritten: its id is a hash of its wing, room and content), then each
   fact is added; any error rolls all of it back, and the caller is told which fact failed and that
   nothing was filed.

Concurrent callers are safe: of two callers filing the same content, the second waits for the
first's drawer insert, finds the drawer there and reports ``already_exists``; identical open facts
are serialised by the graph's per-fact lock into one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

from mempalace_pg.config import Settings
from mempalace_pg.mcp_tools.arguments import ToolInputError, date, entity_name, name
from mempalace_pg.mcp_tools.embedding import document_vectors

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


def file(memory: Memory, *, palace_path: str, settings: Optional[Settings] = None) -> dict:
    """File ``memory`` in the palace at ``palace_path``: all of it, or (raising) nothing."""
    from mempalace_pg.atomic import unit_of_work

    drawer_id, ids, documents, metadatas = drawers_of(memory)
    embeddings = document_vectors(documents, metadatas)
    filed = []
    with unit_of_work(palace_path, settings=settings) as uow:
        # all of a memory's drawers are written in one statement, so all exist or none does
        existed = not uow.add_drawers(
            ids=ids, documents=documents, embeddings=embeddings, metadatas=metadatas, if_absent=True
        )
        for i, fact in enumerate(memory.facts):
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
            filed.append({"triple_id": triple_id, **_fact_dict(fact)})
    return {
        "success": True,
        "drawer_id": drawer_id,
        "drawer_ids": ids,
        "drawer": "already_exists" if existed else "filed",
        "wing": memory.wing,
        "room": memory.room,
        "chunks": len(ids),
        "facts": filed,
    }


def _fact_dict(fact: Fact) -> dict:
    return {
        "subject": fact.subject,
        "predicate": fact.predicate,
        "object": fact.object,
        "valid_from": fact.valid_from,
        "valid_to": fact.valid_to,
    }


__all__ = ["Memory", "Fact", "MAX_FACTS", "drawers_of", "file"]
