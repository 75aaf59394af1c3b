"""mempalace-pg: a MemPalace storage plugin that keeps a whole palace in one PostgreSQL database.

MemPalace discovers the backend through the ``mempalace.backends`` entry point ``postgres``
(``mempalace_pg.backend:PostgresBackend``). This package's import is kept cheap: MemPalace imports
every installed plugin in every process.

Importing it also hooks MemPalace's ``KnowledgeGraph`` so that a palace on the ``postgres`` backend
keeps its knowledge graph in Apache AGE (``mempalace_pg.graph``); other palaces are untouched.
"""

__version__ = "0.1.0"

# MemPalace builds its knowledge graph itself; route postgres palaces to the AGE graph (see routing.py).
from .routing import install as _install_kg_routing  # noqa: E402

_install_kg_routing()
