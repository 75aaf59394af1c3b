"""The table of known extension defects (mempalace_pg.db.defects): version strings as the server and Debian
write them, which versions each defect affects, and the texts doctor and the bootstrap print from it."""

from __future__ import annotations

import pytest

from mempalace_pg.db.defects import (
    DEFECTS,
    PALACE_ROLE_TAG,
    PALACE_TABLES,
    defects_of,
    refusal,
    version_tuple,
)
from mempalace_pg.db.schema import sql_dir


def keys(extension: str, version: str) -> set[str]:
    return {d.key for d in defects_of(extension, version)}


def test_version_strings():
    assert version_tuple("0.8.0") == (0, 8, 0)
    assert version_tuple("0.8.10") > version_tuple("0.8.9")  # numbers, not text
    assert version_tuple("1.5.0~rc0") == (1, 5, 0)  # Debian's pre-release tag
    assert version_tuple("1.8.0~rc0") == (1, 8, 0)
    assert version_tuple("0.8.0-1") == (0, 8, 0)  # a Debian revision
    assert version_tuple("0.8") == (0, 8) and version_tuple("0.8") < (0, 8, 2)
    assert version_tuple("17beta1") == (171,)  # digits kept, letters dropped: never an error


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.7.4", {"parallel-hnsw-build-overflow", "hnsw-vacuum-corruption"}),
        ("0.8.0", {"parallel-hnsw-build-overflow", "hnsw-vacuum-corruption"}),
        ("0.8.1", {"parallel-hnsw-build-overflow", "hnsw-vacuum-corruption"}),
        ("0.8.2", {"hnsw-vacuum-corruption"}),  # the overflow fixed exactly here
        ("0.8.3", {"hnsw-vacuum-corruption"}),  # half the vacuum fix
        ("0.8.4", set()),
        ("0.8.6", set()),
        ("0.8.7", set()),
        ("0.9.0", set()),
    ],
)
def test_pgvector_defects_by_version(version, expected):
    assert keys("vector", version) == expected


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (
            "1.5.0",
            {
                "merge-bugs",
                "no-row-level-security-in-cypher",
                "load-from-file-unchecked",
                "no-merge-on-create-set",
                "vle-fails-on-standby",
            },
        ),
        (
            "1.6.0",
            {
                "no-row-level-security-in-cypher",
                "load-from-file-unchecked",
                "no-merge-on-create-set",
                "vle-fails-on-standby",
            },
        ),
        ("1.7.0", {"no-merge-on-create-set", "vle-fails-on-standby"}),
        ("1.8.0", set()),
        ("1.8.0~rc0", set()),  # Debian sid's: the release candidate carries the 1.8.0 fixes
    ],
)
def test_age_defects_by_version(version, expected):
    assert keys("age", version) == expected


def test_an_extension_without_known_defects_has_none():
    assert defects_of("plpgsql", "1.0") == []


def test_every_defect_says_what_it_means_and_how_to_fix_it():
    assert len({d.key for d in DEFECTS}) == len(DEFECTS)
    for d in DEFECTS:
        assert d.extension in ("vector", "age") and d.fixed_in, d.key
        assert d.what and d.consequence and d.fix and d.reference, d.key
        assert d.fixed_text == "fixed in " + ".".join(map(str, d.fixed_in))
    # only the parallel build overflow puts palace roles at each other's mercy with nothing but an
    # upgrade to close it (AGE's file loading is closed by the bootstrap's REVOKE)
    assert [d.key for d in DEFECTS if d.isolation] == ["parallel-hnsw-build-overflow"]
    [overflow] = [d for d in DEFECTS if d.isolation]
    assert "CVE-2026-3172" in overflow.what and "0.8.2" in overflow.fix
    assert "postgresql-18-pgvector" in overflow.fix and "homelab image" in overflow.fix


def test_the_refusal_names_the_cve_the_roles_the_fix_and_the_override():
    found = [(d, "0.8.0") for d in defects_of("vector", "0.8.0") if d.isolation]
    text = refusal("bob", ["alice"], found)
    assert text.startswith("refusing to make 'bob' a palace role beside 'alice'")
    assert "pgvector 0.8.0 has parallel-hnsw-build-overflow" in text and "CVE-2026-3172" in text
    assert "what alice keeps could leak to bob, and what bob keeps to alice" in text
    assert "upgrade pgvector to 0.8.2 or newer" in text and "postgresql-18-pgvector" in text
    assert "Nothing was changed" in text
    assert text.endswith("add --accept-known-defect parallel-hnsw-build-overflow.")
    several = refusal("dave", ["alice", "bob"], found)
    assert "beside 'alice', 'bob'" in several and "what alice, bob keep could leak to dave" in several


def test_the_bootstrap_tags_the_roles_it_makes_and_revokes_ages_file_loading():
    text = (sql_dir() / "bootstrap" / "02_app_role.sql").read_text(encoding="utf-8")
    [comment] = [line for line in text.splitlines() if line.startswith("COMMENT ON ROLE")]
    assert comment.startswith(f"""COMMENT ON ROLE :"app_role" IS '{PALACE_ROLE_TAG}""")
    assert "REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC" in text
    assert "'load_labels_from_file', 'load_edges_from_file'" in text
    # a palace schema's tables are those of the first revision
    first = (sql_dir() / "0001_drawers.sql").read_text(encoding="utf-8")
    for table in PALACE_TABLES[1:]:
        assert f"CREATE TABLE {table} (" in first
