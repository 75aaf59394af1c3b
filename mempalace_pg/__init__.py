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

__all__ = ["unit_of_work", "UnitOfWork", "PalaceSearch"]


def __getattr__(name):  # the public API, imported on first use (keeps `import mempalace_pg` cheap)
    if name in ("unit_of_work", "UnitOfWork"):
        from . import atomic

        return getattr(atomic, name)
    if name == "PalaceSearch":
        from .retrieval import PalaceSearch

        return PalaceSearch
    raise AttributeError(f"module 'mempalace_pg' has no attribute {name!r}")
