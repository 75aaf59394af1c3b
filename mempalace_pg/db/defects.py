"""Known defects of the extensions by version, and what each means for a palace here.

One table, read by the code that must work around a defect (the vector index folder builds serially on
a pgvector whose parallel HNSW build is unsafe) and by ``mempalace-pg doctor``, which names every defect
of the versions it finds, with its consequence and its fix.

Which version counts. For a bug in an extension's C code, the library the server loads decides: that is
the version the installed package ships, which PostgreSQL reports as the extension's
``default_version`` (its control file). ``extversion`` in ``pg_extension`` only says which SQL objects
were created, and stays behind until ``ALTER EXTENSION ... UPDATE``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import psycopg


def version_tuple(text: str) -> tuple[int, ...]:
    """``'0.8.0'`` -> ``(0, 8, 0)``; Debian's ``'1.5.0~rc0'`` -> ``(1, 5, 0)`` (the pre-release tag dropped)."""
    parts = []
    for piece in text.split("~")[0].split("-")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


@dataclass(frozen=True)
class Defect:
    """A defect of ``extension`` in the versions before ``fixed_in`` (``None``: no release fixes it)."""

    extension: str  # pg_extension.extname: 'vector' or 'age'
    key: str  # a stable name, for doctor --json and tests
    fixed_in: Optional[tuple[int, ...]]
    what: str  # the defect, as its project describes it
    consequence: str  # what it means for a palace on this plugin
    fix: str  # the upgrade path, or what the plugin does instead
    reference: str

    def affects(self, version: tuple[int, ...]) -> bool:
        return self.fixed_in is None or version < self.fixed_in


#: The known defects, oldest first per extension.
DEFECTS: tuple[Defect, ...] = (
    Defect(
        "vector",
        "parallel-hnsw-build-overflow",
        (0, 8, 2),
        "a buffer overflow in parallel HNSW index builds can leak other relations' data or crash the "
        "server (CVE-2026-3172)",
        "mempalace-pg builds its vector index segments without parallel workers on this server; but any "
        "role that may create an index can still run a parallel build on a table of its own, so one "
        "role's palace is not safe from another's here",
        "upgrade pgvector to 0.8.2 or newer (Debian sid's postgresql-18-pgvector, the homelab image's "
        "rebuilt postgresql-17-pgvector, or PGDG's packages), then restart the server; until then keep "
        "one palace role per database server",
        "pgvector CHANGELOG 0.8.2, pgvector#959",
    ),
    Defect(
        "vector",
        "hnsw-vacuum-corruption",
        (0, 8, 4),
        "VACUUM of an HNSW index beside inserts into it can corrupt the index or fail with 'hnsw graph "
        "not repaired'",
        "mempalace-pg never inserts into a built segment on this server: a quiet tail becomes a segment of "
        "its own instead of joining the newest one (a query may walk one more index); writes and "
        "autovacuum otherwise leave the segments' graphs alone",
        "upgrade pgvector to 0.8.4 or newer, then `mempalace-pg` rebuilds nothing: the segments stay valid",
        "pgvector CHANGELOG 0.8.3 and 0.8.4, pgvector#988, #993",
    ),
    Defect(
        "age",
        "no-merge-on-create-set",
        (1, 6, 0),
        "MERGE ... ON CREATE SET is missing, agtype_to_json is missing, and a SET after a non-leading MERGE "
        "is lost",
        "mempalace-pg writes the graph through AGE's SQL functions and is not affected; Cypher you write "
        "yourself is",
        "upgrade Apache AGE to 1.6.0 or newer when your distribution ships it (Debian sid has 1.8.0)",
        "apache/age #1907, #1709, #1691 (fixed in 1.6.0)",
    ),
    Defect(
        "age",
        "no-row-level-security-in-cypher",
        (1, 7, 0),
        "row-level security is not enforced for Cypher, and Cypher's SET/DELETE skip privilege checks",
        "mempalace-pg keeps palaces apart by schema and graph ownership, which AGE does honour; a policy "
        "of your own on the label tables is not applied to Cypher",
        "upgrade Apache AGE to 1.7.0 or newer (Debian sid has 1.8.0~rc0)",
        "apache/age PR #2309",
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


def parallel_hnsw_build_safe(conn: psycopg.Connection) -> bool:
    """Whether HNSW indexes may be built with parallel workers on this server (pgvector 0.8.2 or newer)."""
    version = library_version(conn, "vector")
    return version is not None and not any(d.key == "parallel-hnsw-build-overflow" for d in defects_of("vector", version))


def hnsw_insert_beside_vacuum_safe(conn: psycopg.Connection) -> bool:
    """Whether rows may be inserted into a built HNSW index that VACUUM also works on (pgvector 0.8.4 or
    newer)."""
    version = library_version(conn, "vector")
    return version is not None and not any(d.key == "hnsw-vacuum-corruption" for d in defects_of("vector", version))


__all__ = [
    "DEFECTS",
    "Defect",
    "defects_of",
    "hnsw_insert_beside_vacuum_safe",
    "library_version",
    "parallel_hnsw_build_safe",
    "version_tuple",
]
