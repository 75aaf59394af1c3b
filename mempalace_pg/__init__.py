"""mempalace-pg: a MemPalace storage plugin that keeps a whole palace in one PostgreSQL database.

MemPalace discovers the backend through the ``mempalace.backends`` entry point ``postgres``
(``mempalace_pg.backend:PostgresBackend``). This package's import is kept cheap: MemPalace imports
every installed plugin in every process.
"""

__version__ = "0.1.0"
