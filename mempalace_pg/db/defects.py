"""Known defects of the extensions by version, and what each means for a palace here.

One table, read by the code that must work around a defect (the vector index folder builds serially on
a pgvector whose parallel HNSW build is unsafe), by ``mempalace-pg doctor``, which names every defect of
the versions it finds, with its consequence and its fix, and by ``mempalace-pg db bootstrap --app-role``,
which refuses a second person's role on a server whose extensions let one role read another's palace.

Which version counts. For a bug in an extension's C code, the library the server loads decides: that is
the version the installed package ships, which PostgreSQL reports as the extension's
``default_version`` (its control file). ``extversion`` in ``pg_extension`` only says which SQL objects
were created, and stays behind until ``ALTER EXTENSION ... UPDATE``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

import psycopg

from mempalace_pg.errors import KnownDefectError


def version_tuple(text: str) -> tuple[int, ...]:
    """``'0.8.0'`` -> ``(0, 8, 0)``; Debian's ``'1.5.0~rc0'`` -> ``(1, 5, 0)`` (pre-release tag dropped)."""
    parts = []
    for piece in text.split("~")[0].split("-")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


@dataclass(frozen=True)
class Defect:
    """A defect of ``extension`` in the versions before ``fixed_in`` (``None``: no release fixes it)."""

    extension: str  # pg_extension.extname: 'vector' or 'age'
    key: str  # a stable name, for doctor --json, --accept-known-defect and tests
    fixed_in: Optional[tuple[int, ...]]
    what: str  # the defect, as its project describes it
    consequence: str  # what it means for a palace on this plugin
    fix: str  # the upgrade path, or what the plugin does instead
    reference: str
    # Set when the defect lets one palace role reach another's palace and only an upgrade closes it:
    # what one such role can do to another. Doctor then fails while more than one palace role exists,
    # and the bootstrap refuses to make a second one.
    isolation: Optional[str] = None

    def affects(self, version: tuple[int, ...]) -> bool:
        return self.fixed_in is None or version < self.fixed_in

    @property
    def fixed_in_text(self) -> Optional[str]:
        return ".".join(map(str, self.fixed_in)) if self.fixed_in else None

    @property
    def fixed_text(self) -> str:
        return f"fixed in {self.fixed_in_text}" if self.fixed_in else "no release fixes it yet"


#: The known defects, oldest first per extension.
DEFECTS: tuple[Defect, ...] = (
    Defect(
        "vector",
        "parallel-hnsw-build-overflow",
        (0, 8, 2),
        "a buffer overflow in parallel HNSW index builds (CVE-2026-3172) can leak other relations' data "
        "or crash the server",
        "mempalace-pg builds its vector index segments without parallel workers on this server; but any "
        "role that may create a table can run a parallel build on a table of its own "
        "(max_parallel_maintenance_workers is any session's to set), so one palace role's drawers are not "
        "safe from another's here",
        "upgrade pgvector to 0.8.2 or newer: Debian sid's postgresql-18-pgvector (the project's homelab "
        "image built with STACK=sid), or PGDG's postgresql-NN-pgvector; "
        "then ALTER EXTENSION vector UPDATE in each database and restart the server. Until then keep one "
        "palace role per server",
        "pgvector CHANGELOG 0.8.2, pgvector#959",
        isolation="either palace role can run a parallel HNSW build on a table of its own and, through the "
        "overflow, read the other's drawers (text, metadata, embeddings) or crash the server for both",
    ),
    Defect(
        "vector",
        "hnsw-vacuum-corruption",
        (0, 8, 4),
        "VACUUM of an HNSW index beside inserts into it can corrupt the index (fixed in 0.8.3) or fail "
        "with 'hnsw graph not repaired' (fixed in 0.8.4)",
        "mempalace-pg never inserts into a built segment on this server: a quiet tail becomes a segment of "
        "its own instead of joining the newest one (a query may walk one more index); writes and "
        "autovacuum otherwise leave the segments' graphs alone",
        "upgrade pgvector to 0.8.4 or newer (the same packages); nothing needs rebuilding: the segments "
        "built meanwhile stay valid",
        "pgvector CHANGELOG 0.8.3 and 0.8.4, pgvector#988, #993",
    ),
    Defect(
        "age",
        "merge-bugs",
        (1, 6, 0),
        "MERGE can create duplicate or incomplete vertices and a SET after MERGE can lose edge "
        "properties; there is no cast from agtype to json (agtype_to_json)",
        "mempalace-pg writes the graph through AGE's SQL functions and is not affected; Cypher you write "
        "yourself is",
        "upgrade Apache AGE to 1.6.0 or newer when your distribution ships it (Debian sid has 1.8.0~rc0)",
        "apache/age #1691, #1709, #1907, #2075",
    ),
    Defect(
        "age",
        "no-row-level-security-in-cypher",
        (1, 7, 0),
        "row-level security is not enforced for Cypher, and Cypher's SET/DELETE skip privilege checks",
        "mempalace-pg keeps palaces apart by schema and graph ownership, which AGE does honour "
        "(tests/integration/test_isolation.py); but a role you let use another's graph schema (to read it) "
        "can change it with Cypher, and a policy of your own on the label tables is not applied to Cypher",
        "upgrade Apache AGE to 1.7.0 or newer (Debian sid has 1.8.0~rc0)",
        "apache/age PR #2309",
    ),
    Defect(
        "age",
        "load-from-file-unchecked",
        (1, 7, 0),
        "load_labels_from_file() and load_edges_from_file() open any path the server's operating-system "
        "user can read, with no privilege check, and a file that is not CSV can crash the server",
        "a role that may use ag_catalog (every role `db bootstrap --app-role` makes) could read the "
        "server's files (its TLS key, its configuration) into a graph of its own, or crash the server for "
        "every palace; so `db bootstrap --app-role` revokes both functions from PUBLIC in its database "
        "(mempalace-pg never calls them)",
        "upgrade Apache AGE to 1.7.0 or newer (Debian sid has 1.8.0~rc0), which limits them to roles with "
        "pg_read_server_files; until then, in each database whose roles were not made by `db bootstrap "
        "--app-role` (or were made before it revoked them), as a superuser: REVOKE EXECUTE ON FUNCTION "
        "ag_catalog.load_labels_from_file, ag_catalog.load_edges_from_file FROM PUBLIC",
        "apache/age PR #2274, #2310",
    ),
    Defect(
        "age",
        "no-merge-on-create-set",
        (1, 8, 0),
        "MERGE ... ON CREATE SET and ON MATCH SET are not supported",
        "mempalace-pg writes the graph through AGE's SQL functions and is not affected; Cypher you write "
        "yourself cannot use them",
        "upgrade Apache AGE to 1.8.0 or newer (Debian sid)",
        "apache/age PR #2347",
    ),
    Defect(
        "age",
        "vle-fails-on-standby",
        (1, 8, 0),
        "variable-length paths (-[*1..3]->) fail on a hot standby ('cannot acquire lock mode ShareLock ... "
        "while recovery is in progress')",
        "mempalace-pg's traversals use recursive SQL and run on a standby; your own Cypher with "
        "variable-length paths does not",
        "upgrade Apache AGE to 1.8.0 or newer (Debian sid)",
        "apache/age #2160, PR #2345",
    ),
)


def defects_of(extension: str, version: str) -> list[Defect]:
    """The known defects of ``extension`` at ``version`` (e.g. ``'0.8.0'``)."""
    have = version_tuple(version)
    return [d for d in DEFECTS if d.extension == extension and d.affects(have)]


def library_version(conn: psycopg.Connection, extension: str) -> Optional[str]:
    """The version of ``extension`` whose library the server loads (its installed package's), or None
    when the server has no such extension."""
    row = conn.execute(
        "SELECT default_version FROM pg_available_extensions WHERE name = %s", (extension,)
    ).fetchone()
    return row[0] if row else None


def server_defects(conn: psycopg.Connection) -> list[tuple[Defect, str]]:
    """Every known defect of the extension libraries installed on the server, with the version that has
    it (installed on the server, whether or not created in this database: any database may load it)."""
    found = []
    for extension in ("vector", "age"):
        version = library_version(conn, extension)
        if version is not None:
            found += [(d, version) for d in defects_of(extension, version)]
    return found


def parallel_hnsw_build_safe(conn: psycopg.Connection) -> bool:
    """Whether HNSW indexes may be built with parallel workers on this server (pgvector 0.8.2 or newer)."""
    return not _has(conn, "vector", "parallel-hnsw-build-overflow")


def hnsw_insert_beside_vacuum_safe(conn: psycopg.Connection) -> bool:
    """Whether rows may be inserted into a built HNSW index that VACUUM also works on (pgvector 0.8.4 or
    newer)."""
    return not _has(conn, "vector", "hnsw-vacuum-corruption")


def _has(conn: psycopg.Connection, extension: str, key: str) -> bool:
    """Whether the server's ``extension`` has defect ``key`` (or is missing: then nothing is safe)."""
    version = library_version(conn, extension)
    return version is None or any(d.key == key for d in defects_of(extension, version))


# -- palace roles: who a defect that breaks isolation puts at risk ---------------------------------------

#: The start of the comment sql/bootstrap/02_app_role.sql puts on each role it makes (COMMENT ON ROLE).
PALACE_ROLE_TAG = "mempalace-pg palace role"

#: The tables every mempalace-pg palace schema holds from its first revision on (sql/0001_drawers.sql).
PALACE_TABLES = ("alembic_version", "palaces", "collections")

# A palace role: a role that is not a superuser (a superuser reads every palace anyway, so no defect
# changes what it can reach) and either
#   1. carries the tag `db bootstrap --app-role` puts on the roles it makes: a comment that starts with
#      PALACE_ROLE_TAG (pg_shdescription, shared by every database of the server), or
#   2. owns, in the database connected to, a palace schema: one holding all of PALACE_TABLES (a role
#      given its palace by hand, or made by a bootstrap older than the tag).
# Roles are the server's, so the tag counts a role whatever database its palace is in; ownership is
# seen in the connected database only (pg_namespace is per database). Everything read here is readable
# by any role (pg_roles, pg_namespace, pg_class, pg_shdescription), so a palace role's doctor counts too.
PALACE_ROLES_SQL = """
    SELECT r.rolname
    FROM pg_catalog.pg_roles r
    WHERE NOT r.rolsuper
      AND (pg_catalog.starts_with(COALESCE(pg_catalog.shobj_description(r.oid, 'pg_authid'), ''), %(tag)s)
           OR EXISTS (
               SELECT 1
               FROM pg_catalog.pg_namespace n
               JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid
               WHERE n.nspowner = r.oid
                 AND c.relkind IN ('r', 'p')
                 AND c.relname = ANY(%(tables)s)
               GROUP BY n.oid
               HAVING count(DISTINCT c.relname) = cardinality(%(tables)s)))
    ORDER BY r.rolname
"""


def palace_roles(conn: psycopg.Connection) -> list[str]:
    """The palace roles of the server, as seen from the database ``conn`` is connected to (see
    PALACE_ROLES_SQL for the definition)."""
    rows = conn.execute(PALACE_ROLES_SQL, {"tag": PALACE_ROLE_TAG, "tables": list(PALACE_TABLES)})
    return [name for (name,) in rows]


def _names(roles: Iterable[str]) -> str:
    return ", ".join(repr(r) for r in roles)


def _label(defect: Defect) -> str:
    return {"vector": "pgvector", "age": "Apache AGE"}.get(defect.extension, defect.extension)


def refusal(role: str, others: list[str], found: list[tuple[Defect, str]]) -> str:
    """Why ``role`` is not made a palace role beside ``others`` on a server with the isolation
    defects ``found``, and what to do: upgrade, or accept each defect knowingly."""
    them = ", ".join(others)
    reasons = " ".join(
        f"This server's {_label(d)} {version} has {d.key}: {d.what} ({d.fixed_text}). "
        f"{d.isolation[0].upper()}{d.isolation[1:]}: what {them} keep{'s' if len(others) == 1 else ''} "
        f"could leak to {role}, and what {role} keeps to {them}."
        for d, version in found
    )
    fixes = "; ".join(d.fix for d, _ in found)
    accept = " ".join(f"--accept-known-defect {d.key}" for d, _ in found)
    return (
        f"refusing to make {role!r} a palace role beside {_names(others)}. {reasons} Nothing was changed. "
        f"Fix: {fixes}. Then run this again. To go ahead anyway, knowing the risk: add {accept}."
    )


def check_new_palace_role(conn: psycopg.Connection, role: str, accept: Iterable[str] = ()) -> list[str]:
    """Before ``role`` is made a palace role (``db bootstrap --app-role``), changing nothing: raise
    :class:`KnownDefectError` when the server has a defect that breaks isolation between palace roles
    and another palace role exists, unless each such defect's key is in ``accept``; returns warnings,
    one per defect accepted that way (or when ``role`` exists already and becomes a second palace role:
    rerunning the bootstrap for a role, to change its password, is never refused).

    Two bootstraps at the same moment can both pass this check; doctor still finds the pair."""
    accept = set(accept)
    unknown = accept - {d.key for d in DEFECTS}
    if unknown:
        raise ValueError(
            f"no known defect is called {', '.join(sorted(unknown))}: the known ones are "
            f"{', '.join(d.key for d in DEFECTS)}"
        )
    found = [(d, v) for d, v in server_defects(conn) if d.isolation]
    if not found:
        return []
    palace = palace_roles(conn)
    others = [r for r in palace if r != role]
    if role in palace or not others:
        return []
    exists = conn.execute("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", (role,)).fetchone()
    refused = [(d, v) for d, v in found if d.key not in accept]
    if refused and not exists:
        raise KnownDefectError(refusal(role, others, refused))
    return [
        f"{role!r} becomes a palace role beside {_names(others)} although this server's {_label(d)} "
        f"{version} has {d.key} ({d.what}; {d.fixed_text}): {d.isolation}. `mempalace-pg doctor` fails "
        f"until it is fixed. Fix: {d.fix}"
        for d, version in found
    ]


__all__ = [
    "DEFECTS",
    "Defect",
    "KnownDefectError",
    "PALACE_ROLE_TAG",
    "PALACE_TABLES",
    "check_new_palace_role",
    "defects_of",
    "hnsw_insert_beside_vacuum_safe",
    "library_version",
    "palace_roles",
    "parallel_hnsw_build_safe",
    "refusal",
    "server_defects",
    "version_tuple",
]
