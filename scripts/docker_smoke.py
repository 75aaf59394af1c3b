"""The smoke check scripts/docker-stack.sh runs against the homelab stack, as MemPalace's client would.

MEMPALACE_PG_DSN names the application role with ``sslmode=verify-full`` and no password (libpq takes it
from PGPASSFILE). Checks: TLS is on, the role is no superuser, pg_prewarm's autoprewarm worker runs, the
same DSN without a password is refused, and a drawer with its fact is written in one unit of work and
found again around its entity, in a schema of its own that is dropped afterwards. Exits non-zero on any
failure; never prints a password.
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid

import psycopg


def main() -> int:
    dsn = os.environ["MEMPALACE_PG_DSN"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        user, superuser, ssl, tls_version = conn.execute(
            "SELECT current_user, r.rolsuper, s.ssl, s.version FROM pg_roles r, pg_stat_ssl s "
            "WHERE r.rolname = current_user AND s.pid = pg_backend_pid()"
        ).fetchone()
        server = conn.execute("SHOW server_version").fetchone()[0]
        extensions = dict(conn.execute("SELECT extname, extversion FROM pg_extension").fetchall())
        # the entrypoint preloads pg_prewarm: its autoprewarm brings the buffers back after a restart
        autoprewarm = conn.execute(
            "SELECT COALESCE(current_setting('pg_prewarm.autoprewarm', true) = 'on', false)"
        ).fetchone()[0]
    print(
        f"[smoke] connected as {user} (superuser: {superuser}), TLS: {ssl} {tls_version}, "
        f"PostgreSQL {server}, pgvector {extensions.get('vector')}, AGE {extensions.get('age')}"
    )
    if not ssl or superuser:
        print("[smoke] FAIL: the connection is not encrypted, or the role is a superuser", file=sys.stderr)
        return 1
    if not autoprewarm:
        print("[smoke] FAIL: no autoprewarm worker runs (pg_prewarm not preloaded)", file=sys.stderr)
        return 1
    try:  # SCRAM on TCP: the same DSN with an empty password file is refused
        with tempfile.NamedTemporaryFile() as empty:
            psycopg.connect(dsn, passfile=empty.name, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        print(f"[smoke] the same DSN without a password is refused: {' '.join(str(exc).split())[-70:]}")
    else:
        print("[smoke] FAIL: a connection without a password was accepted", file=sys.stderr)
        return 1

    schema = f"smoke_{uuid.uuid4().hex[:8]}"
    os.environ["MEMPALACE_PG_SCHEMA"] = schema
    from mempalace_pg import unit_of_work
    from mempalace_pg.db import pool
    from mempalace_pg.engine.indexing import folder_application_name
    from mempalace_pg.retrieval import PalaceSearch

    try:
        with unit_of_work(palace_key="smoke") as uow:
            uow.add_drawers(ids=["d1"], documents=["the NAS runs PostgreSQL"], embeddings=[[1.0, 0.0]])
            uow.add_triple("NAS", "runs", "PostgreSQL", source_drawer_id="d1")
        hits = PalaceSearch(palace_key="smoke").around_entity("NAS", [1.0, 0.0])["hits"]
        if [h["id"] for h in hits] != ["d1"]:
            print(f"[smoke] FAIL: around 'NAS' found {[h['id'] for h in hits]}, not ['d1']", file=sys.stderr)
            return 1
        print(f"[smoke] a drawer and its fact written in schema {schema}, found again around 'NAS'")
    finally:
        pool.close_all()
        with psycopg.connect(dsn, autocommit=True) as conn:
            # the vector index folder the write started would hold the DROP up (as the tests' conftest does)
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (folder_application_name(schema),),
            )
            conn.execute(
                "SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph WHERE name = %s",
                (f"{schema}_kg",),
            )
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return 0


if __name__ == "__main__":
    sys.exit(main())
