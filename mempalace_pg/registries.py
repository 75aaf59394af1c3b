"""Every piece of process-wide state the package keeps, in one list, and one :func:`reset`.

A MemPalace process (a CLI command, an MCP server) opens a palace many times over: MemPalace builds a
backend, a collection or a knowledge graph per call in places. What is costly to find again is kept
for the process, in the module that uses it:

- ``db/pool.py``: ``_POOLS``, one connection pool per DSN and connection settings (which settings:
  see that module), and ``_DATABASES``, a ``Database`` per ``Settings`` with its schema checked, until
  ``close_all()``: what every caller in the process shares. ``_HELD``, the transaction
  ``Database.held()`` holds, is a context variable: each thread's and task's own. ``_BREADTH``, each
  pooled connection's hnsw.ef_search, is weakly keyed by the connection and lives as long as it.
  What a pool's connections learn of the way to the server (a pooler between, the search path) is the
  pool's own (``HotFirstPool.route``).
- ``db/schema.py``: ``head_revision()`` (``lru_cache``), the migrations' head: immutable.
- On each ``Database`` (``Database.kept``), gone with it: per collection, its vector index's
  ``IndexState`` (``engine/indexing.py``): the layout as last read (``LAYOUT_TTL_S``), the folder this
  process started, when it last looked for one and whether it was told none can run, and the rows
  written since it last counted those waiting for the index (``engine/backlog.py``); and each palace's
  key in its knowledge graph's tables (``graph/kg.py``), for every graph of it the process opens.
- ``graph/values.py``: ``_MEMPALACE``, MemPalace's helpers imported once, for the process.
- ``graph/routing.py``: ``_SQLITE_CLASS``, MemPalace's own SQLite ``KnowledgeGraph``, for the process.
- ``graph/statements.py``: ``statements()`` (``lru_cache``), each graph's statements, each keeping its
  timeline pages in a bounded ``StatementCache``, until ``statements.cache_clear()``.
- ``mining.py``: ``_MINING``, a context variable: the mined item's transactions of this thread or task,
  for as long as MemPalace mines one source file.
- ``patching.py``: ``_PATCHES`` and ``_patched``, the registered patches and the modules patched, for
  the process.
- ``mcp_tools/in_mempalace.py``: ``_tools``, the pg_* tools per palace directory, until ``forget()``.

Objects keep their own caches too (a collection's and a ``PalaceSearch``'s statements), gone with them.
"""

from __future__ import annotations

from mempalace_pg.db import pool
from mempalace_pg.graph.statements import statements
from mempalace_pg.mcp_tools import in_mempalace


def reset() -> None:
    """Forget everything :mod:`this module <mempalace_pg.registries>` lists that a palace can change:
    close every pool (and with its Database what is kept on it: each collection's index state, the
    palace keys), drop the graph statements and the MCP tools. For tests that drop and recreate schemas,
    and for a process that points at another database. MemPalace's helpers, the patches and running
    folders stay (they do not depend on a database)."""
    pool.close_all()
    statements.cache_clear()
    in_mempalace.forget()


__all__ = ["reset"]
