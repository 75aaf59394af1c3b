"""``mempalace-pg mcp``: the palace's graph-aware tools over MCP (stdio), on the official ``mcp`` SDK.

An AI client runs it as one more server beside MemPalace's own (``mempalace-mcp``), which keeps its 47
tools; clients merge the two lists. Configuration (Claude Desktop, Claude Code, any ``mcpServers``)::

    "mempalace-pg": {"command": "mempalace-pg", "args": ["mcp", "--palace", "/home/me/.mempalace/palace"],
                     "env": {"MEMPALACE_PG_DSN": "postgresql://..."}}

Why a separate server (see docs/mcp.md): MemPalace 3.11 gives a storage plugin no seam to
add tools, and a separate process needs none of MemPalace's internals, cannot collide with its tool
names, works whichever way MemPalace's own server is run (stdio, its hub proxy, the light server), and
speaks the protocol through the SDK. The cost is a second process and a second configuration entry.

Errors come back as MCP tool errors (``is_error``) with a message that names the argument and the fix,
or says the database refused the call and that nothing was written; never a traceback (the server logs
those on stderr).
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated, Any, Literal, Optional

import psycopg
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from mempalace.backends.base import BackendError
from pydantic import ConfigDict, Field, with_config
from typing_extensions import NotRequired, TypedDict

from mempalace_pg import __version__
from mempalace_pg.mcp_tools.arguments import ToolInputError
from mempalace_pg.mcp_tools.tools import TOOLS, PalaceTools
from mempalace_pg.retrieval import MAX_HOPS

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Graph-aware memory over a MemPalace palace stored in PostgreSQL. The drawers (verbatim memories) "
    "and the knowledge graph (facts between entities, each drawn from a drawer) live in one database, "
    "so these tools can follow facts to the memories they came from. Use pg_search_around_entity when "
    "a question is about a person, project or thing and the answer may be in a memory that does not "
    "name it; pg_entity_facts for what is known about an entity and the evidence; "
    "pg_entities_for_query to find the entity a question is about; pg_hybrid_search for names, "
    "commands and exact words; pg_file_memory to store a memory together with the facts it states."
)

# -- the arguments, described once for the model ---------------------------------------------------------
Entity = Annotated[str, Field(description="The entity's name as the knowledge graph knows it, e.g. 'Alice'")]
Query = Annotated[str, Field(description="What to look for: a short question or keywords")]
Hops = Annotated[
    int, Field(description=f"How many facts away from the entity to look (1-{MAX_HOPS})", ge=1, le=MAX_HOPS)
]
AsOf = Annotated[Optional[str], Field(description="Only facts valid on this date (YYYY-MM-DD)")]
Limit = Annotated[int, Field(description="How many results (1-100)")]
Wing = Annotated[Optional[str], Field(description="Only drawers of this wing")]
Room = Annotated[Optional[str], Field(description="Only drawers of this room")]
Mode = Annotated[
    Literal["restrict", "boost", "fuse"],
    Field(
        description="restrict: only drawers linked to the entity; boost: all drawers, linked ones "
        "raised by a fixed amount; fuse: all drawers, ranked by rank fusion with the linked ones"
    ),
]
KeepEntity = Annotated[
    bool,
    Field(
        description="false (default): the entity's name is taken out of the query before ranking, since "
        "the entity already chose the neighbourhood; true: rank by the query as written"
    ),
]
Stale = Annotated[
    Literal["mark", "demote"],
    Field(description="mark: say which results are stale; demote: also rank them after current ones"),
]
Direction = Annotated[
    Literal["outgoing", "incoming", "both"],
    Field(description="outgoing: facts with the entity as subject; incoming: as object"),
]


@with_config(ConfigDict(extra="forbid"))
class FactArgument(TypedDict):
    """A fact the memory states: subject -> predicate -> object, dates YYYY-MM-DD."""

    subject: str
    predicate: str
    object: str
    valid_from: NotRequired[Optional[str]]
    valid_to: NotRequired[Optional[str]]


FactList = Annotated[
    Optional[list[FactArgument]],
    Field(
        description="Facts the memory states, each {subject, predicate, object, valid_from?, valid_to?} "
        "(dates YYYY-MM-DD); each is stored with this memory as its evidence"
    ),
]


#: What every tool returns: a JSON object, sent as the result's structured content (and as text).
Answer = dict[str, Any]


def _annotations(read_only: bool) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=read_only, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )


def answer(tools: PalaceTools, method: str, arguments: dict) -> dict:
    """One tool call; a failure becomes the message a model can act on (raised as ``ToolInputError``
    for a bad argument or a refused call, anything else logged with its traceback and re-raised)."""
    try:
        return tools.call(method, arguments)
    except (ToolInputError, BackendError, ValueError) as exc:
        raise ToolInputError(str(exc)) from None
    except psycopg.Error as exc:
        detail = (str(exc).strip().splitlines() or [""])[0]
        log.warning("%s: database error %s: %s", method, type(exc).__name__, detail)
        raise ToolInputError(
            f"the database refused the call ({type(exc).__name__}: {detail}); nothing was written"
        ) from None


def build_server(tools: PalaceTools) -> MCPServer:
    """The MCP server of one palace's tools (:data:`~mempalace_pg.mcp_tools.tools.TOOLS`)."""
    server = MCPServer(name="mempalace-pg", instructions=INSTRUCTIONS, version=__version__)
    specs = {spec.name: spec for spec in TOOLS}

    def tool(fn):
        spec = specs[fn.__name__]
        server.add_tool(
            fn, name=spec.name, description=spec.description, annotations=_annotations(spec.read_only)
        )
        return fn

    def run(method: str, **arguments) -> dict:
        try:
            return answer(tools, method, arguments)
        except ToolInputError as exc:
            raise ToolError(str(exc)) from None

    @tool
    def pg_search_around_entity(
        entity: Entity,
        query: Query,
        hops: Hops = 1,
        as_of: AsOf = None,
        mode: Mode = "restrict",
        limit: Limit = 5,
        wing: Wing = None,
        room: Room = None,
        keep_entity_in_query: KeepEntity = False,
    ) -> Answer:
        return run(
            "search_around_entity",
            entity=entity,
            query=query,
            hops=hops,
            as_of=as_of,
            mode=mode,
            limit=limit,
            wing=wing,
            room=room,
            keep_entity_in_query=keep_entity_in_query,
        )

    @tool
    def pg_entity_facts(
        entity: Entity,
        query: Annotated[
            Optional[str], Field(description="Rank facts by their drawer's similarity to this")
        ] = None,
        as_of: AsOf = None,
        direction: Direction = "both",
        limit: Annotated[int, Field(description="At most this many facts (1-100)")] = 50,
    ) -> Answer:
        return run("entity_facts", entity=entity, query=query, as_of=as_of, direction=direction, limit=limit)

    @tool
    def pg_entities_for_query(
        query: Query, limit: Limit = 10, as_of: AsOf = None, wing: Wing = None, room: Room = None
    ) -> Answer:
        return run("entities_for_query", query=query, limit=limit, as_of=as_of, wing=wing, room=room)

    @tool
    def pg_hybrid_search(
        query: Query,
        limit: Limit = 5,
        wing: Wing = None,
        room: Room = None,
        as_of: Annotated[
            Optional[str], Field(description="Judge staleness by the facts valid on this date (YYYY-MM-DD)")
        ] = None,
        stale: Stale = "mark",
        text_weight: Annotated[
            Optional[float],
            Field(
                description="Weight of exact words against meaning, 0-1 (default 0.5; 1 weighs them equally)"
            ),
        ] = None,
    ) -> Answer:
        return run(
            "hybrid_search",
            query=query,
            limit=limit,
            wing=wing,
            room=room,
            as_of=as_of,
            stale=stale,
            text_weight=text_weight,
        )

    @tool
    def pg_file_memory(
        wing: Annotated[str, Field(description="The wing to file into (e.g. a project or person)")],
        room: Annotated[str, Field(description="The room within the wing (a topic)")],
        content: Annotated[str, Field(description="The memory, verbatim")],
        facts: FactList = None,
        source_file: Annotated[Optional[str], Field(description="Where the memory came from")] = None,
        added_by: Annotated[str, Field(description="Who files it")] = "mcp",
    ) -> Answer:
        return run(
            "file_memory",
            wing=wing,
            room=room,
            content=content,
            facts=facts,
            source_file=source_file,
            added_by=added_by,
        )

    return server


def main(palace_path: str) -> int:
    """Serve ``palace_path``'s tools over stdio until the client closes the connection."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="mempalace-pg mcp: %(message)s")
    tools = PalaceTools(palace_path)
    try:
        build_server(tools).run("stdio")
    finally:
        tools.close()
    return 0


__all__ = ["build_server", "answer", "main", "INSTRUCTIONS"]
