"""mempalace-pg: a MemPalace storage plugin that keeps a whole palace in one PostgreSQL database.

MemPalace discovers the backend through the ``mempalace.backends`` entry point ``postgres``
(``mempalace_pg.store.backend:PostgresBackend``). This package's import is kept cheap: MemPalace imports
every installed plugin in every process.

Importing it also installs :mod:`mempalace_pg.hooks`, the adaptations that make MemPalace's own
commands work on a postgres palace (its knowledge graph in Apache AGE, its tunnels, audit, taxonomy);
other palaces are untouched. ``mempalace_pg_hooks.pth`` installs them when Python starts.
"""

__version__ = "0.1.0"

# MemPalace reads some of a palace's stores itself; adapt those paths for postgres palaces (hooks.py).
from mempalace_pg.hooks import install as _install_hooks

_install_hooks()

#: The public API: name -> the module that defines it, imported on first use (keeps
#: `import mempalace_pg` cheap).
_PUBLIC = {
    "PostgresBackend": "mempalace_pg.store.backend",
    "AgeKnowledgeGraph": "mempalace_pg.graph.kg",
    "unit_of_work": "mempalace_pg.atomic",
    "UnitOfWork": "mempalace_pg.atomic",
    "open_drawers": "mempalace_pg.atomic",
    "PalaceSearch": "mempalace_pg.retrieval",
}
__all__ = list(_PUBLIC)


def __getattr__(name):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'mempalace_pg' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
