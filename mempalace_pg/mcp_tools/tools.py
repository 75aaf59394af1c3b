"""The MCP tools of a postgres palace, as plain functions: what each tool does, checks and returns.

Both servers (:mod:`~mempalace_pg.mcp_tools.server`, :mod:`~mempalace_pg.mcp_tools.in_mempalace`)
serve exactly these: :data:`TOOLS` names each tool, describes it for a language model and says whether
it writes; :class:`PalaceTools` runs it.

Inputs are checked as MemPalace's own tools check theirs, with MemPalace's own checks: wing, room and
predicate names by ``sanitize_name``, entity names by ``sanitize_kg_value``, dates by
``sanitize_iso_temporal``, queries by ``sanitize_query`` (which cuts a system prompt pasted before
the question), ``limit`` clamped to 1..100 as ``mempalace_search`` clamps it. Anything else that is
wrong raises :class:`ToolInputError`, whose message names the argument and the fix; the servers
return it as the tool's error, never a traceback.

The read tools answer exactly what :class:`~mempalace_pg.retrieval.PalaceSearch` answers for the same
arguments, the query embedded with MemPalace's configured embedder (the one the palace was mined with:
MemPalace's own check runs when the palace is first opened).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional

from mempalace_pg.config import Settings
from mempalace_pg.db.sqlkit import MAX_ROW_COUNT
from mempalace_pg.mcp_tools import filing
from mempalace_pg.mcp_tools.arguments import (
    MAX_RESULTS,
    ToolInputError,
    choice,
    date,
    entity_name,
    flag,
    optional_name,
    query_text,
    weight,
    whole_number,
)
from mempalace_pg.mcp_tools.embedding import query_vector


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its MCP name, its description for the model, and whether it changes the palace."""

    name: str
    method: str
    description: str
    read_only: bool


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "pg_search_around_entity",
        "search_around_entity",
        "Search memories connected to a person, project, place or thing through the knowledge graph. "
        "Use it when the question is about an entity and the answer may sit in a memory that never "
        "names it (a fact links them): it walks the graph `hops` steps from `entity`, takes the "
        "drawers the facts found there were drawn from, and ranks them by similarity to `query`. "
        "mode='restrict' returns only those drawers; mode='boost' searches every drawer and ranks "
        "those up by a fixed amount, mode='fuse' by rank fusion. `as_of` (YYYY-MM-DD) keeps only "
        "facts valid on that date. Each hit lists the facts drawn from it. entity_found=false "
        "means the graph does not know the entity: use mempalace_search instead.",
        True,
    ),
    ToolSpec(
        "pg_entity_facts",
        "entity_facts",
        "What the knowledge graph knows about an entity, each fact with its evidence: the drawer it "
        "was drawn from (its text, wing and room) and, when `query` is given, that drawer's "
        "similarity to the query, best-supported facts first. `as_of` (YYYY-MM-DD) keeps facts valid "
        "then; `direction` is outgoing (entity is the subject), incoming or both.",
        True,
    ),
    ToolSpec(
        "pg_entities_for_query",
        "entities_for_query",
        "Which people, projects and things a question is about: the entities of the knowledge graph "
        "linked (by facts drawn from them) to the drawers most similar to `query`, best first, "
        "after the entities `query` names (`named`). Use "
        "it to find the entity to pass to pg_search_around_entity or pg_entity_facts when the "
        "question does not name one.",
        True,
    ),
    ToolSpec(
        "pg_hybrid_search",
        "hybrid_search",
        "Search drawers by meaning and by exact words at once (vector and PostgreSQL full-text "
        "rankings fused by reciprocal rank fusion). Better than a pure semantic search for names, "
        "error messages, commands and rare words. Optional wing/room filters. Each result says "
        "whether it is `stale`: every fact drawn from it has ended or was replaced by a newer one "
        "(`standing.replaced_by` names the drawers of the newer facts); `stale='demote'` ranks stale "
        "drawers last, `as_of` asks what held on a date.",
        True,
    ),
    ToolSpec(
        "pg_file_memory",
        "file_memory",
        "File a memory and the facts drawn from it in one transaction: the drawer (verbatim "
        "`content` in `wing`/`room`, its id made as mempalace_add_drawer makes it) and each fact "
        "{subject, predicate, object, valid_from?, valid_to?} pointing at that drawer as its "
        "evidence. Either everything is stored or, on any error, nothing is. Filing the same "
        "content again stores no second drawer (drawer='already_exists') and no second copy of its "
        "facts, so it is safe to retry. Each fact in the answer says whether this call stored it "
        "(new) and which drawer is its evidence (an identical open fact already known keeps its own).",
        False,
    ),
)


# -- the tools -------------------------------------------------------------------------------------------
class PalaceTools:
    """The tools of one postgres palace (by directory), sharing one PalaceSearch and its pool.

    Thread-safe: the servers may run calls in worker threads; each call holds the palace's lock, so a
    server answers one call at a time (each is one statement or one transaction).
    """

    def __init__(self, palace_path: str, *, settings: Optional[Settings] = None):
        self.palace_path = palace_path
        self.settings = settings
        self._search = None
        self._embedder_checked = False
        self._lock = threading.Lock()

    def _palace(self, *, writing: bool = False):
        from mempalace_pg.retrieval import PalaceSearch

        if not self._embedder_checked:
            # until it has run once on the palace's drawers (none yet, the database down: try again)
            self._embedder_checked = _check_embedder(self.palace_path, create=writing)
        if self._search is None:
            self._search = PalaceSearch(palace_path=self.palace_path, settings=self.settings)
        return self._search

    def close(self) -> None:
        with self._lock:
            if self._search is not None:
                self._search.close()
                self._search = None

    def call(self, method: str, arguments: dict) -> dict:
        """Run one tool by its method name with the arguments a client sent."""
        with self._lock:
            return getattr(self, method)(**arguments)

    # each tool: its arguments, checked, then one PalaceSearch call --------------------------------
    def search_around_entity(
        self,
        entity: str,
        query: str,
        hops: int = 1,
        as_of: Optional[str] = None,
        mode: str = "restrict",
        limit: int = 5,
        wing: Optional[str] = None,
        room: Optional[str] = None,
        keep_entity_in_query: bool = False,
    ) -> dict:
        from mempalace_pg.retrieval import MAX_HOPS
        from mempalace_pg.retrieval.around import query_without_entity

        entity = entity_name(entity)
        query = query_text(query)
        hops = whole_number(hops, "hops", 1, MAX_HOPS, clamp=False)
        as_of = date(as_of, "as_of")
        from mempalace_pg.retrieval.around import AROUND_MODES

        mode = choice(mode, "mode", AROUND_MODES)
        limit = whole_number(limit, "limit", 1, MAX_RESULTS, clamp=True)
        wing, room = optional_name(wing, "wing"), optional_name(room, "room")
        keep = flag(keep_entity_in_query, "keep_entity_in_query")
        ranked_by = query if keep else query_without_entity(query, entity)
        return self._palace().around_entity(
            entity,
            query_vector(ranked_by),
            hops=hops,
            as_of=as_of,
            n_results=limit,
            mode=mode,
            wing=wing,
            room=room,
        )

    def entity_facts(
        self,
        entity: str,
        query: Optional[str] = None,
        as_of: Optional[str] = None,
        direction: str = "both",
        limit: int = 50,
    ) -> dict:
        entity = entity_name(entity)
        query = None if query is None or not str(query).strip() else query_text(query)
        as_of = date(as_of, "as_of")
        direction = choice(direction, "direction", ("outgoing", "incoming", "both"))
        limit = whole_number(limit, "limit", 1, MAX_RESULTS, clamp=True)
        vector = query_vector(query) if query else None
        return self._palace().facts_with_evidence(
            entity, vector, as_of=as_of, direction=direction, limit=limit
        )

    def entities_for_query(
        self,
        query: str,
        limit: int = 10,
        as_of: Optional[str] = None,
        wing: Optional[str] = None,
        room: Optional[str] = None,
    ) -> dict:
        query = query_text(query)
        limit = whole_number(limit, "limit", 1, MAX_RESULTS, clamp=True)
        as_of = date(as_of, "as_of")
        wing, room = optional_name(wing, "wing"), optional_name(room, "room")
        rows = self._palace().entities_for_query(
            query_vector(query), n_results=limit, as_of=as_of, wing=wing, room=room, query_text=query
        )
        return {"entities": rows}

    def hybrid_search(
        self,
        query: str,
        limit: int = 5,
        wing: Optional[str] = None,
        room: Optional[str] = None,
        as_of: Optional[str] = None,
        stale: str = "mark",
        text_weight: Optional[float] = None,
    ) -> dict:
        from mempalace_pg.retrieval.hybrid import TEXT_WEIGHT

        query = query_text(query)
        limit = whole_number(limit, "limit", 1, MAX_RESULTS, clamp=True)
        wing, room = optional_name(wing, "wing"), optional_name(room, "room")
        as_of = date(as_of, "as_of")
        from mempalace_pg.retrieval.staleness import STALE_MODES

        stale = choice(stale, "stale", STALE_MODES)
        text_weight = TEXT_WEIGHT if text_weight is None else weight(text_weight, "text_weight")
        rows = self._palace().hybrid(
            query,
            query_vector(query),
            n_results=limit,
            wing=wing,
            room=room,
            as_of=as_of,
            stale=stale,
            text_weight=text_weight,
        )
        return {"results": rows}

    def file_memory(
        self,
        wing: str,
        room: str,
        content: str,
        facts: Optional[list] = None,
        source_file: Optional[str] = None,
        added_by: str = "mcp",
    ) -> dict:
        memory = filing.Memory.checked(
            wing=wing, room=room, content=content, facts=facts, source_file=source_file, added_by=added_by
        )
        palace = self._palace(writing=True)  # the embedder check, before anything is embedded with it

        def facts_of(subject: str) -> list:
            return palace.facts_with_evidence(subject, direction="outgoing", limit=MAX_ROW_COUNT)["facts"]

        return filing.file(memory, palace_path=self.palace_path, facts_of=facts_of, settings=self.settings)


def _check_embedder(palace_path: str, *, create: bool) -> bool:
    """MemPalace's own check that its configured embedder is the one the palace's vectors came from
    (RFC 001): a query embedded by another model would be compared with the wrong vectors. With
    ``create`` (a tool about to write) the drawers collection is opened as MemPalace's writers open
    it, so a palace whose first drawer is filed here records its embedder as a mined one does.
    True once the check has run on the palace's drawers."""
    from mempalace.backends.base import DimensionMismatchError, EmbedderIdentityMismatchError
    from mempalace.palace import get_collection

    try:
        get_collection(palace_path, create=create, read_only=not create)
        return True
    except (EmbedderIdentityMismatchError, DimensionMismatchError, ValueError) as exc:
        raise ToolInputError(str(exc)) from None  # what MemPalace says, with its remedy
    except Exception:  # no drawers yet, the database down: the tool itself reports it
        return False


__all__ = ["TOOLS", "ToolSpec", "PalaceTools", "ToolInputError", "MAX_RESULTS"]
