"""Hand MemPalace the AGE knowledge graph for palaces on the ``postgres`` backend.

MemPalace 3.11 has no plugin seam for its knowledge graph: the MCP server, ``mine --source``, the
fact checker and the Hermes integration construct ``mempalace.knowledge_graph.KnowledgeGraph(db_path=...)``
themselves. MemPalace imports every installed backend plugin on its first ``mempalace.palace``
import, before those modules bind the name, so :func:`install` (run when ``mempalace_pg`` is
imported) rebinds it to :class:`KnowledgeGraph` below, which routes **per palace**:

* ``db_path`` inside a palace directory holding our marker (``<palace>/knowledge_graph.sqlite3``:
  MCP with ``--palace``, ``mine --source``, the fact checker) -> that palace's AGE graph;
* MemPalace's default path ``~/.mempalace/knowledge_graph.sqlite3`` (MCP without ``--palace``) ->
  the configured palace's AGE graph, if that palace is a postgres one;
* a sibling of a postgres palace (Hermes keeps its graph beside the palace directory) -> that
  palace's AGE graph, if it is the configured palace;
* anything else -> MemPalace's own SQLite ``KnowledgeGraph``, untouched.

A stray ``knowledge_graph.sqlite3`` inside a postgres palace is never opened. :mod:`mempalace_pg.hooks`
installs the router.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

from mempalace_pg.marker import has_marker

_SQLITE_CLASS = None


def configured_palace() -> Optional[str]:
    """The palace directory MemPalace is configured with (resolved), or None when its configuration
    cannot be read."""
    try:
        from mempalace.config import MempalaceConfig

        return os.path.realpath(os.path.expanduser(MempalaceConfig().palace_path))
    except Exception:  # no usable config: nothing to route to
        return None


def palace_for_kg_path(db_path: Optional[str]) -> Optional[str]:
    """The postgres palace directory whose knowledge graph ``db_path`` names, or None (SQLite).
    ``db_path`` may also be the palace's marker itself (what ``mempalace kg normalize`` and
    ``audit`` are given for a postgres palace, see :mod:`mempalace_pg.hooks`)."""
    from mempalace import knowledge_graph as kgm

    path = os.path.realpath(os.path.expanduser(db_path or kgm.DEFAULT_KG_PATH))
    parent = os.path.dirname(path)
    if has_marker(parent):
        return parent
    configured = configured_palace()
    if configured is None or not has_marker(configured):
        return None
    if path == os.path.realpath(os.path.expanduser(kgm.DEFAULT_KG_PATH)):
        return configured
    if os.path.dirname(configured) == parent:  # Hermes: <parent of palace>/knowledge_graph.sqlite3
        return configured
    return None


def sqlite_class() -> type:
    """MemPalace's own SQLite ``KnowledgeGraph`` class, whether or not :func:`install` has rebound the
    name to the router."""
    global _SQLITE_CLASS
    if _SQLITE_CLASS is None:
        from mempalace import knowledge_graph as kgm

        _SQLITE_CLASS = getattr(kgm, "_SQLITE_KNOWLEDGE_GRAPH", kgm.KnowledgeGraph)
    return _SQLITE_CLASS


class KnowledgeGraph:
    """Drop-in for ``mempalace.knowledge_graph.KnowledgeGraph(db_path=None)``: the AGE graph for a
    postgres palace, MemPalace's SQLite graph for every other one."""

    def __new__(cls, db_path: Optional[str] = None):
        palace = palace_for_kg_path(db_path)
        if palace is None:
            return sqlite_class()(db_path)
        from mempalace_pg.graph.kg import AgeKnowledgeGraph

        return AgeKnowledgeGraph(db_path=db_path, palace_path=palace)


def install(module) -> None:
    """Rebind ``KnowledgeGraph`` in ``module`` to the router (idempotent): in
    ``mempalace.knowledge_graph`` itself (the SQLite class is kept as ``_SQLITE_KNOWLEDGE_GRAPH``), and
    in a module that bound the SQLite class already (the MCP server, Hermes). Called by
    :mod:`mempalace_pg.hooks` right after MemPalace executes those modules."""
    global _SQLITE_CLASS
    if module.__name__ == "mempalace.knowledge_graph":
        current = getattr(module, "KnowledgeGraph", None)
        if current is not None and current is not KnowledgeGraph:
            module._SQLITE_KNOWLEDGE_GRAPH = current
            module.KnowledgeGraph = KnowledgeGraph
            _SQLITE_CLASS = current
        return
    kgm = sys.modules.get("mempalace.knowledge_graph")
    original = getattr(kgm, "_SQLITE_KNOWLEDGE_GRAPH", None)
    if original is not None and getattr(module, "KnowledgeGraph", None) is original:
        module.KnowledgeGraph = KnowledgeGraph


__all__ = ["KnowledgeGraph", "configured_palace", "install", "palace_for_kg_path", "sqlite_class"]
