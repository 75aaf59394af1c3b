"""``mempalace-pg backup`` / ``restore``: ``pg_dump`` of mempalace-pg's schema and AGE graph, and the
fix-up that makes the graph work again after ``pg_restore``.

Why a fix-up: AGE keeps its catalog (``ag_catalog.ag_graph``, ``ag_catalog.ag_label``) as rows keyed by
OIDs (the graph's schema, each label's table). A dump restored elsewhere gets new OIDs, so the catalog rows
either are missing (a schema-only dump does not carry them) or point at nothing (AGE issue #2503), and every
Cypher call fails. So:

* **backup** writes the graph's label catalog (name, id, kind, sequence) into the comment of the graph's
  schema, then runs ``pg_dump --format=custom`` of our schema and the graph's schema only (no
  ``ag_catalog``): one file, restorable with the stock ``pg_restore`` too;
* **restore** runs ``pg_restore`` into a database that has the extensions (``mempalace-pg db bootstrap``)
  and none of our objects yet, then re-registers the graph in ``ag_catalog`` from that comment, with the new
  OIDs, checks the graph with a Cypher count and analyzes the restored tables (``pg_restore`` leaves
  them without planner statistics).

A restore is mostly index builds, the vector index's segments above all. ``pg_restore``'s sessions build
them with the palace's build memory (``MEMPALACE_PG_BUILD_MEMORY``: at the server's default
``maintenance_work_mem`` a segment's graph spills to disk and takes several times as long) and only with
the parallel workers the server's pgvector builds safely (none before 0.8.2, CVE-2026-3172), as the
folder builds them. ``--jobs N`` runs ``pg_restore``'s N sessions side by side (it then reads the file
itself, so the file must be where ``pg_restore`` runs, and it is no longer one transaction: a restore that
fails drops what it had restored); the sessions share the workers one build would get, since N builds at
once with a build's workers each would run more processes than the server has cores.

``pg_dump``/``pg_restore`` must match the server's major version: ``--pg-dump`` / ``--pg-restore`` take the
command to run (e.g. ``"docker compose -f docker/compose.yaml exec -T db pg_dump"``). Credentials reach
them through libpq's environment (PGPASSWORD, ...), never the command line.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import Iterator

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from mempalace_pg.config import ConfigError, Settings, validate_identifier
from mempalace_pg.db import locks
from mempalace_pg.db.connect import scrub_password
from mempalace_pg.errors import DatabaseUnavailableError
from mempalace_pg.marker import write_atomically

CATALOG_MARK = "mempalace-pg AGE label catalog (used by mempalace-pg restore): "


#: Connection parameters that libpq also reads from the environment, and their variables (libpq's
#: "Environment Variables" table): pg_dump and pg_restore get the DSN through these, so a verify-full DSN
#: (sslrootcert, a client certificate, a password file) reaches them whole and no secret is on their
#: command line. The few parameters without a variable (keepalives*, sslpassword, replication) are not
#: passed on: none of them is needed to reach the server.
LIBPQ_ENV = {
    "host": "PGHOST",
    "hostaddr": "PGHOSTADDR",
    "port": "PGPORT",
    "dbname": "PGDATABASE",
    "user": "PGUSER",
    "password": "PGPASSWORD",
    "passfile": "PGPASSFILE",
    "service": "PGSERVICE",
    "options": "PGOPTIONS",
    "application_name": "PGAPPNAME",
    "connect_timeout": "PGCONNECT_TIMEOUT",
    "client_encoding": "PGCLIENTENCODING",
    "target_session_attrs": "PGTARGETSESSIONATTRS",
    "load_balance_hosts": "PGLOADBALANCEHOSTS",
    "require_auth": "PGREQUIREAUTH",
    "channel_binding": "PGCHANNELBINDING",
    "requirepeer": "PGREQUIREPEER",
    "sslmode": "PGSSLMODE",
    "sslnegotiation": "PGSSLNEGOTIATION",
    "sslcompression": "PGSSLCOMPRESSION",
    "sslcert": "PGSSLCERT",
    "sslcertmode": "PGSSLCERTMODE",
    "sslkey": "PGSSLKEY",
    "sslrootcert": "PGSSLROOTCERT",
    "sslcrl": "PGSSLCRL",
    "sslcrldir": "PGSSLCRLDIR",
    "sslsni": "PGSSLSNI",
    "ssl_min_protocol_version": "PGSSLMINPROTOCOLVERSION",
    "ssl_max_protocol_version": "PGSSLMAXPROTOCOLVERSION",
    "gssencmode": "PGGSSENCMODE",
    "krbsrvname": "PGKRBSRVNAME",
    "gsslib": "PGGSSLIB",
    "gssdelegation": "PGGSSDELEGATION",
    "min_protocol_version": "PGMINPROTOCOLVERSION",
    "max_protocol_version": "PGMAXPROTOCOLVERSION",
}


def libpq_env(dsn: str) -> dict:
    """The environment for pg_dump / pg_restore: ours, with the DSN's parameters as libpq variables
    (a parameter the DSN gives wins over the same variable in our environment)."""
    params = conninfo_to_dict(dsn)
    env = dict(os.environ)
    for key, var in LIBPQ_ENV.items():
        if params.get(key):
            env[var] = str(params[key])
    return env


def session_options(conn: psycopg.Connection, jobs: int = 1) -> dict[str, str]:
    """Server settings for ``pg_restore``'s ``jobs`` sessions: its index builds get the folder's build
    memory (``builds.build_settings``), and the parallel workers this server's builds may use shared
    among the sessions building at once (``builds.shared_workers``)."""
    from mempalace_pg.engine.builds import build_settings, shared_workers
    from mempalace_pg.engine.indexing import BUILD_WORKERS

    return build_settings(conn, shared_workers(BUILD_WORKERS, jobs))


def pgoptions(options: dict[str, str]) -> str:
    """``options`` as PGOPTIONS takes them."""
    # the values are checked settings (a size, an integer): nothing in them needs PGOPTIONS' escaping
    return " ".join(f"-c {name}={value}" for name, value in options.items())


def _dsn(settings: Settings) -> str:
    """The DSN the server's tools use: the session DSN where one is set (pg_dump holds a snapshot and
    pg_restore its sessions' settings, which a transaction pooler would not keep)."""
    return settings.session_dsn or settings.dsn


def _run(
    command: str, args: list[str], settings: Settings, *, stdin=None, stdout=None, options: str = ""
) -> None:
    argv = shlex.split(command) + args
    env = libpq_env(_dsn(settings))
    if options:
        env["PGOPTIONS"] = f"{env.get('PGOPTIONS', '')} {options}".strip()
    try:
        proc = subprocess.run(
            argv,
            env=env,
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            check=False,
        )
    except FileNotFoundError:
        raise _not_found(argv[0]) from None
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip()
        message = scrub_password(scrub_password(message, settings.dsn), _dsn(settings))
        hint = ""
        if "version mismatch" in message:
            hint = " (pg_dump must be the server's major version or newer: pass --pg-dump)"
        elif "startup parameter" in message:
            hint = " (a pooler refuses session settings: set MEMPALACE_PG_SESSION_DSN to the server itself)"
        raise ConfigError(f"{argv[0]} failed: {message[-800:]}{hint}")


def _not_found(program: str) -> ConfigError:
    return ConfigError(
        f"{program!r} not found: install the PostgreSQL client of the server's version, "
        "or pass the command to run with --pg-dump / --pg-restore"
    )


def _label_catalog(conn: psycopg.Connection, graph: str) -> list[dict]:
    rows = conn.execute(
        """
        SELECT l.name, l.id, l.kind, l.seq_name
        FROM ag_catalog.ag_label l
        JOIN ag_catalog.ag_graph g ON g.graphid = l.graph
        WHERE g.name = %(graph)s
        ORDER BY l.id
    """,
        {"graph": graph},
    ).fetchall()
    return [{"name": n, "id": i, "kind": k, "seq_name": s} for n, i, k, s in rows]


def _names(settings: Settings) -> tuple[str, str]:
    """The schema and graph names, checked (they are used as identifiers and in pg_dump's arguments)."""
    return (
        validate_identifier(settings.schema, "schema"),
        validate_identifier(settings.graph, "graph", longest=63),
    )


def backup(path: str, settings: Settings, *, pg_dump: str = "pg_dump") -> dict:
    """Dump our schema and graph to ``path`` (pg_dump custom format). Returns what was written."""
    from mempalace_pg.db.connect import connect

    schema, graph = _names(settings)
    with connect(settings, autocommit=True) as conn:
        labels = _label_catalog(conn, graph)
        if not labels:
            raise ConfigError(f"no AGE graph {graph!r} in this database: nothing to back up (wrong schema?)")
        catalog = {"graph": graph, "schema": schema, "labels": labels}
        # COMMENT takes no bound parameters: the text is a literal
        try:
            conn.execute(
                sql.SQL("COMMENT ON SCHEMA {graph} IS {comment}").format(
                    graph=sql.Identifier(graph), comment=sql.Literal(CATALOG_MARK + json.dumps(catalog))
                )
            )
        except psycopg.errors.InsufficientPrivilege as exc:
            # the catalog goes into the graph schema's comment, which only its owner may write
            raise ConfigError(
                f"role {conn.info.user!r} may not back up schema {schema!r} and graph {graph!r} "
                f"({str(exc).splitlines()[0]}): back up as their owner (the role that `db bootstrap "
                "--schema` made them for) or a superuser"
            ) from None
    compression = dump_compression(pg_dump, settings)
    args = ["--format=custom", "--no-password", f"--schema={schema}", f"--schema={graph}"]
    # a failed dump never leaves a file that looks complete
    with write_atomically(path, binary=True) as out:
        try:
            _run(pg_dump, [*args, f"--compress={compression}"], settings, stdout=out)
        except ConfigError as exc:
            if "does not support compression" not in str(exc) or compression == FALLBACK_COMPRESSION:
                raise
            compression = FALLBACK_COMPRESSION  # a pg_dump built without zstd
            out.seek(0)
            out.truncate()
            _run(pg_dump, [*args, f"--compress={compression}"], settings, stdout=out)
    return {
        "file": path,
        "bytes": os.path.getsize(path),
        "schema": schema,
        "graph": graph,
        "labels": len(labels),
        "compression": compression,
    }


#: pg_dump's compression of a backup. Its own default (gzip at level 6) spends most of a dump's time
#: compressing vectors, which hardly compress; zstd at level 1 (pg_dump 16 and newer) writes a file as
#: small in a fraction of the time, gzip at level 1 where there is no zstd (benchmarks/RESULTS.md,
#: "Whole-palace jobs").
COMPRESSION = "zstd:1"
FALLBACK_COMPRESSION = "gzip:1"


def dump_compression(pg_dump: str, settings: Settings) -> str:
    """The compression ``pg_dump`` is asked for: :data:`COMPRESSION` where it knows zstd (16 and newer),
    else :data:`FALLBACK_COMPRESSION`."""
    argv = shlex.split(pg_dump) + ["--version"]
    try:
        proc = subprocess.run(
            argv, env=libpq_env(_dsn(settings)), capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise _not_found(argv[0]) from None
    return compression_for(proc.stdout)


def compression_for(version: str) -> str:
    """The compression for a ``pg_dump`` that printed ``version`` (``pg_dump (PostgreSQL) 17.2 ...``)."""
    match = re.search(r"\) (\d+)", version)
    return COMPRESSION if match and int(match.group(1)) >= 16 else FALLBACK_COMPRESSION


def restore(path: str, settings: Settings, *, pg_restore: str = "pg_restore", jobs: int = 1) -> dict:
    """Restore a backup into the configured database, then re-register its graph with AGE.

    ``jobs`` above 1 runs that many ``pg_restore`` sessions side by side; ``pg_restore`` then reads
    ``path`` itself, and a restore that fails drops the schema and graph it had begun."""
    from mempalace_pg.db.connect import connect

    if not os.path.isfile(path):
        raise ConfigError(f"{path}: no such file")
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs}: give 1 or more sessions")
    schema, graph = _names(settings)
    with connect(settings, autocommit=True) as conn:
        _check_restorable(conn, schema, graph)
        build_options = session_options(conn, jobs)
    options = pgoptions(build_options)
    dbname = conninfo_to_dict(_dsn(settings)).get("dbname") or "postgres"
    args = ["--no-password", "--no-owner", "--exit-on-error", f"--dbname={dbname}"]
    with _folders_held_off(settings, schema):
        return {
            "file": path,
            "jobs": jobs,
            "build_workers": int(build_options["max_parallel_maintenance_workers"]),
            **_run_pg_restore(path, settings, (schema, graph), pg_restore, args, jobs, options),
        }


@contextmanager
def _folders_held_off(settings: Settings, schema: str) -> Iterator[None]:
    """No folder builds on the palace until the block ends (locks.restore_key): a connection of its own
    holds the lock in a transaction left open, idle, for as long as the restore runs."""
    from mempalace_pg.db.connect import connect

    guard = connect(replace(settings, dsn=_dsn(settings)), autocommit=True)
    try:
        guard.execute("BEGIN")
        # a big palace restores for longer than the application role's idle-in-transaction timeout
        guard.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
        locks.acquire_for_transaction(guard, locks.restore_key(schema), what="restore")
        yield
    finally:
        # ends the transaction and its lock (nothing was written in it); a connection the server cut
        # meanwhile took the lock with it, and the restore's own outcome stands
        guard.close()


def _run_pg_restore(
    path: str,
    settings: Settings,
    names: tuple[str, str],
    pg_restore: str,
    args: list[str],
    jobs: int,
    options: str,
) -> dict:
    """``pg_restore`` with ``args`` in one transaction or ``jobs`` sessions, then :func:`finish_restore`.
    ``names``: the schema and graph being restored, dropped again if a restore in sessions fails."""
    from mempalace_pg.db.connect import connect

    schema, graph = names
    if jobs == 1:
        # one transaction: a restore that fails leaves nothing behind; the file streams in on stdin, so a
        # pg_restore in a container reads a file outside it
        with open(path, "rb") as f:
            _run(pg_restore, [*args, "--single-transaction"], settings, stdin=f, options=options)
    else:
        try:
            _run(pg_restore, [*args, f"--jobs={jobs}", os.path.abspath(path)], settings, options=options)
        except ConfigError as exc:
            try:
                with connect(settings, autocommit=True) as conn:
                    _drop_begun(conn, schema, graph)
            except (psycopg.Error, DatabaseUnavailableError) as dropping:
                raise ConfigError(
                    f"{exc}; dropping what it had restored failed too ({str(dropping).splitlines()[0]}): "
                    f"drop schemas {schema} and {graph} (`mempalace-pg db drop --yes`) before restoring again"
                ) from None
            raise ConfigError(f"{exc}; what it had restored was dropped") from None
    return finish_restore(settings)


def finish_restore(settings: Settings) -> dict:
    """What ``restore`` does once ``pg_restore`` has restored a backup's schema and graph: the graph
    registered again in AGE's catalog, counted by Cypher, and the restored tables analyzed. Public for
    a restore run in parts (``benchmarks/bench_restore_parts.py``: a palace too big for one run)."""
    from mempalace_pg.db.connect import connect

    schema, graph = _names(settings)
    with connect(settings, autocommit=True) as conn, conn.transaction():
        catalog = _register_graph(conn, graph)
    with connect(settings, autocommit=True) as conn:
        edges = _count_facts(conn, graph)
        left = _analyze_schema(conn, schema)
    return {
        "schema": schema,
        "graph": graph,
        "labels": len(catalog["labels"]),
        "facts_seen_by_cypher": edges,
        "not_analyzed": left,
    }


def _drop_begun(conn: psycopg.Connection, schema: str, graph: str) -> None:
    """Drop what a failed restore had made: the schema and graph, which did not exist before it began
    (``_check_restorable``), and no graph row yet (``_register_graph`` runs after ``pg_restore``)."""
    for name in (schema, graph):
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


#: How long a restore waits, all tables together, for the locks its ANALYZE needs (autovacuum, which
#: takes up a freshly loaded table at once, gives way after deadlock_timeout; other work may not).
ANALYZE_WAIT_S = 30.0


def _analyze_schema(conn: psycopg.Connection, schema: str) -> list[str]:
    """Planner statistics for every restored table of the schema, each partition by name: ``pg_restore``
    leaves none, and a big partition without them gets plans that read it whole where its vector index
    would have answered. An ANALYZE of a partitioned table that skips a partition someone else locks
    says nothing of it, so each partition is analyzed itself. Each waits for its lock, all of them
    together for up to ANALYZE_WAIT_S; the tables left then (autovacuum's to analyze). In ``restore`` no
    folder builds meanwhile; called on its own beside a folder's CREATE INDEX CONCURRENTLY, which waits
    for the ANALYZE in turn, the deadlock PostgreSQL breaks leaves that table too."""
    tables = conn.execute(
        "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        # the partitions first; then their parents, whose ANALYZE samples them again for the statistics
        # of the whole
        "WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p') ORDER BY c.relkind DESC, c.relname",
        {"schema": schema},
    ).fetchall()
    # PostgreSQL 18's ANALYZE ONLY gives a parent its statistics without analyzing each partition again
    # (a big partition would be sampled twice); before 18, a parent's ANALYZE recurses
    only = sql.SQL("ONLY ") if conn.info.server_version >= 180000 else sql.SQL("")
    deadline = time.monotonic() + ANALYZE_WAIT_S
    left = []
    for table, kind in tables:
        wait_ms = int((deadline - time.monotonic()) * 1000)
        statement = sql.SQL("ANALYZE {only}{table}").format(
            only=only if kind == "p" else sql.SQL(""), table=sql.Identifier(schema, table)
        )
        try:
            with conn.transaction():
                conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{max(wait_ms, 1)}ms",))
                conn.execute(statement)
        except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected):
            left.append(table)
    return left


def _check_restorable(conn: psycopg.Connection, schema: str, graph: str) -> None:
    """Refuse a database without the extensions, or one that holds our schema or graph already."""
    have = {r[0] for r in conn.execute("SELECT extname FROM pg_extension")}
    missing = {"vector", "age"} - have
    if missing:
        raise ConfigError(
            f"the database lacks the extension(s) {', '.join(sorted(missing))}: run "
            "`mempalace-pg db bootstrap` as a superuser first"
        )
    taken = [
        n
        for n in (schema, graph)
        if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %(name)s", {"name": n}).fetchone()
    ]
    if (
        taken
        or conn.execute(
            "SELECT 1 FROM ag_catalog.ag_graph WHERE name = %(graph)s", {"graph": graph}
        ).fetchone()
    ):
        raise ConfigError(
            f"schema(s) {', '.join(taken) or graph} already exist in this database: to restore in "
            "place, drop them first (`mempalace-pg db drop --yes`, every palace in the schema); or restore "
            "into a database without them, or under another MEMPALACE_PG_SCHEMA"
        )


def _register_graph(conn: psycopg.Connection, graph: str) -> dict:
    """Enter the restored graph and its labels into AGE's catalog, with their new OIDs, from the label
    catalog the backup left in the graph schema's comment; that catalog."""
    comment = conn.execute(
        "SELECT obj_description(%(graph)s::regnamespace, 'pg_namespace')", {"graph": graph}
    ).fetchone()[0]
    if not comment or not comment.startswith(CATALOG_MARK):
        raise ConfigError(
            f"the backup has no AGE label catalog for {graph!r} (not made by mempalace-pg "
            "backup, or made for another schema)"
        )
    catalog = json.loads(comment[len(CATALOG_MARK) :])
    conn.execute(
        """
        INSERT INTO ag_catalog.ag_graph (graphid, name, namespace)
        VALUES (%(graph)s::regnamespace::oid, %(graph)s, %(graph)s::regnamespace)
    """,
        {"graph": graph},
    )
    for label in catalog["labels"]:
        relation = sql.Identifier(graph, label["name"]).as_string(conn)
        conn.execute(
            """
            INSERT INTO ag_catalog.ag_label (name, graph, id, kind, relation, seq_name)
            VALUES (%(name)s, %(graph)s::regnamespace::oid, %(id)s, %(kind)s, %(relation)s::regclass,
                    %(seq_name)s)
        """,
            {
                "name": label["name"],
                "graph": graph,
                "id": label["id"],
                "kind": label["kind"],
                "relation": relation,
                "seq_name": label["seq_name"],
            },
        )
    return catalog


def _count_facts(conn: psycopg.Connection, graph: str) -> int:
    """The graph's facts as Cypher counts them (the check that AGE can use the graph again), after
    an ANALYZE of its label tables."""
    if _is_superuser(conn):
        conn.execute("LOAD 'age'")
    else:
        _load_age_plugin(conn)
    conn.execute("SET search_path = ag_catalog, public")
    # cypher() takes the graph name as a constant, not a parameter; the name is validated
    edges = conn.execute(
        sql.SQL(
            "SELECT * FROM cypher({graph}, $$ MATCH ()-[f:Fact]->() RETURN count(f) $$) AS (n agtype)"
        ).format(graph=sql.Literal(graph))
    ).fetchone()[0]
    conn.execute(
        sql.SQL("ANALYZE {entity}, {fact}").format(
            entity=sql.Identifier(graph, "Entity"), fact=sql.Identifier(graph, "Fact")
        )
    )
    return int(str(edges))


def _is_superuser(conn: psycopg.Connection) -> bool:
    return bool(conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0])


def _load_age_plugin(conn: psycopg.Connection) -> None:
    try:
        conn.execute("LOAD '$libdir/plugins/age'")
    except psycopg.Error:
        pass  # preloaded (session_preload_libraries), or Cypher below says what is wrong


__all__ = ["LIBPQ_ENV", "backup", "finish_restore", "libpq_env", "pgoptions", "restore", "session_options"]
