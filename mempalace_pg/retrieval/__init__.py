"""Retrieval that joins the knowledge graph and the drawer vectors, each in one SQL statement.

    from mempalace_pg.retrieval import PalaceSearch
    search = PalaceSearch(palace_path="~/.mempalace/palace")
    search.around_entity("Alice", query_vector, hops=2, as_of="2026-01-15")
    search.facts_with_evidence("Alice", query_vector)
    search.entities_for_query(query_vector)
    search.hybrid("garden basil decision", query_vector, wing="home")

Each method is one statement, so one round trip and one snapshot: the graph walk, the vector search
and the joins all see the same committed state. Every value is a bound parameter. Query vectors come
from the caller (MemPalace's embedder: see :func:`embed_query`).

How the pieces are found:

* **neighbourhood**: a breadth-first walk over the Fact label table written into the statement, one
  set-based join per hop over the start_id/end_id indexes, never revisiting an entity (the same walk
  as the ``kg_neighbourhood()`` SQL function of sql/0003, which is there for psql);
* **facts within N hops**: the facts that touch an entity closer than N hops (the ones the walk
  crossed), valid at ``as_of`` when given (half-open ``[valid_from, valid_to)``, as MemPalace's
  ``query_entity``); without ``as_of`` every fact counts, as in MemPalace;
* **evidence**: a fact's ``source_drawer_id`` joined to the palace's drawers by primary key;
* **nearest drawers**: the backend's own search (HNSW with iterative scans, or an exact scan when the
  candidate set is small), restricted in SQL.

Unknown entities and empty graphs give empty answers (``entity_found`` tells which), never errors.
"""

from mempalace_pg.retrieval.around import DEFAULT_BOOST
from mempalace_pg.retrieval.base import MAX_HOPS
from mempalace_pg.retrieval.embedding import EmbedderError, embed_documents, embed_query, query_vector
from mempalace_pg.retrieval.hybrid import HYBRID_CANDIDATES, RRF_K
from mempalace_pg.retrieval.palace_search import PalaceSearch

__all__ = [
    "PalaceSearch",
    "embed_query",
    "embed_documents",
    "query_vector",
    "EmbedderError",
    "RRF_K",
    "HYBRID_CANDIDATES",
    "MAX_HOPS",
    "DEFAULT_BOOST",
]
