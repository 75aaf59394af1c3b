"""Alembic environment for mempalace-pg.

Run through ``mempalace-pg db upgrade`` (or automatically on first use), which passes its
``Settings`` (DSN, schema, graph) in ``config.attributes``. Plain ``alembic -c alembic.ini upgrade head``
also works: it reads MEMPALACE_PG_DSN / MEMPALACE_PG_SCHEMA like the plugin does.

Never autogenerate against this database: Apache AGE's schemas and label tables are not ours to
diff. Revisions are hand-written and each applies one file from sql/.
"""

from alembic import context

from mempalace_pg.db.schema import run_migrations_online

run_migrations_online(context)
