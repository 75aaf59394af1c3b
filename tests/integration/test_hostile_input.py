"""Hostile text in every field: stored as MemPalace's built-in pgvector backend stores it, found again, never
a raw error.

The reference is MemPalace's own code: ``_strip_nul`` (mempalace/backends/pgvector.py) and
``strip_lone_surrogates`` (mempalace/config.py), the two steps its pgvector backend applies before
writing. Every string below goes into every field of a drawer and of the knowledge graph; each must
read back exactly as that reference makes it (zero altered values), be found again by the filters and
lookups MemPalace uses, and no call may raise anything but a clear ValueError (zero raw psycopg or
codec errors). The graph is also compared with MemPalace's SQLite graph fed the reference's values.
"""

from __future__ import annotations

import random
import string

import psycopg
import pytest
from mempalace.backends.pgvector import _strip_nul  # noqa: PLC2701 - MemPalace's rule is the reference
from mempalace.config import strip_lone_surrogates

from mempalace_pg.graph.kg import AgeKnowledgeGraph

_rng = random.Random(20261201)


def _random_text(n: int, alphabet: str) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


HOSTILE = [
    "",
    " ",
    "\t\n\r",
    "\x00",
    "a\x00b",
    "\x00\x00lead",
    "trail\x00",
    "\x00" * 8,
    "\ud800",
    "\udfff",
    "caf\udce9.md",
    "/notes/caf\udce9.md",
    "\ud83d lone high",
    "pair \ud83d\ude00 kept",
    "mixed \x00 and \udce9 together",
    "😀 emoji",
    "\U0010ffff max",
    "\ufeffbom",
    "\ufffe\uffff nonchars",
    "\u202e right-to-left override",
    "e\u0301 combining",
    "zero\u200bwidth\u200djoiner",
    "日本語のテキスト",
    "العربية",
    "\u2028line\u2029para",
    "".join(chr(c) for c in range(1, 32)) + "\x7f",
    "back\\slash \\u0000 \\x00 literal",
    "quote ' double \" backtick `",
    "Robert'); DROP TABLE records;--",
    "$$ MATCH (n) DETACH DELETE n $$",
    "%s %(palace)s %b {} {0}",
    '{"wing": "json-looking"}',
    "null",
    "true",
    "NaN",
    "-0",
    "1e309",
    "docs/bash/README.Debian",
    "https://github.com/containers/buildah/blob/main/README.md?x=1#frag",
    "jdoe@example.org",
    "C:\\Users\\Public\\file.txt",
    # longer than a B-tree entry may be (about 2.7 kB), incompressible
    _random_text(3000, string.ascii_letters + string.digits),
    _random_text(1200, "日本語中文한국어"),  # 3 bytes each: 3.6 kB
    "/" + "/".join(_random_text(40, string.ascii_lowercase) for _ in range(100)),  # a 4 kB path
    _random_text(20_000, string.printable),
]
assert len(HOSTILE) >= 40


def reference(value: str) -> str:
    """What MemPalace's built-in pgvector backend stores for ``value``."""
    return strip_lone_surrogates(_strip_nul(value))


def vectors(n: int, dim: int = 4) -> list:
    return [[1.0, float(i % 7), float(i % 3), 0.5] for i in range(n)]


def _no_raw_errors(call):
    """Run ``call``; anything but a clear ValueError is a failure."""
    try:
        return call()
    except (psycopg.Error, UnicodeError) as exc:  # pragma: no cover - the defect this test is for
        pytest.fail(f"raw driver/codec error: {type(exc).__name__}: {exc}")


@pytest.mark.parametrize(
    "field", ["id", "document", "metadata key", "metadata value", "wing", "room", "source_file", "filed_at"]
)
# One test walks every lookup MemPalace makes for the field; its branches are the fields' kinds.
def test_every_drawer_field_stores_and_finds_hostile_text(make_collection, field):  # noqa: C901
    col = make_collection(name=f"hostile-{field.replace(' ', '-')}")
    ids, docs, metas = [], [], []
    for i, value in enumerate(HOSTILE):
        ids.append(value if field == "id" else f"drawer-{i}")
        docs.append(value if field == "document" else f"document {i}")
        meta = {"wing": "w", "room": "r", "n": i}
        if field == "metadata key":
            meta[value] = "v"
        elif field == "metadata value":
            meta["note"] = value
        elif field in ("wing", "room", "source_file", "filed_at"):
            meta[field] = value
        metas.append(meta)
    # As ids, "\x00" * 8 and "" (or two lone surrogates) are one id once made storable: a batch holding
    # both is refused (test_bad_input); here each such id is written once.
    keep = list(
        {reference(v) if field == "id" else i: i for i, v in reversed(list(enumerate(HOSTILE)))}.values()
    )
    _no_raw_errors(
        lambda: col.upsert(
            ids=[ids[k] for k in keep],
            documents=[docs[k] for k in keep],
            metadatas=[metas[k] for k in keep],
            embeddings=vectors(len(keep)),
        )
    )

    for i in sorted(keep):
        value = HOSTILE[i]
        want_id = reference(ids[i])
        got = _no_raw_errors(lambda: col.get(ids=[ids[i]], include=["documents", "metadatas"]))
        assert got.ids == [want_id], (field, value[:40])
        assert got.documents == [reference(docs[i])]
        meta = got.metadatas[0]
        if field == "metadata key":
            assert meta.get(reference(value)) == "v"
        elif field == "metadata value":
            assert meta["note"] == reference(value)
        elif field in ("wing", "room", "source_file", "filed_at"):
            assert meta[field] == reference(value)
            # found again by the filter MemPalace sends, with the value as written (or as stored)
            for needle in (value, reference(value)):
                found = _no_raw_errors(lambda: col.get(where={field: needle}, include=[]).ids)
                assert want_id in found, (field, value[:40])
                assert _no_raw_errors(
                    lambda: col.get(where={field: {"$in": [needle, "other"]}}, include=[])
                ).ids
                hits = _no_raw_errors(
                    lambda: col.query(
                        query_embeddings=[vectors(1)[0]],
                        n_results=3,
                        where={"$and": [{field: needle}, {"n": i}]},
                    )
                )
                assert hits.ids == [[want_id]]
            assert _no_raw_errors(lambda: col.get(where={field: {"$ne": value}}, include=[]).ids) is not None
            for op in ("$gt", "$gte", "$lt", "$lte", "$contains"):
                _no_raw_errors(lambda: col.get(where={field: {op: value}}, include=[]))
        if field == "document" and reference(value):
            assert want_id in _no_raw_errors(
                lambda: col.get(where_document={"$contains": reference(value)}, include=[]).ids
            )
    # lexical search, where_document and deletes with every hostile string answer without a raw error
    for value in HOSTILE:
        _no_raw_errors(lambda: col.lexical_search(query=value, n_results=5, where={"wing": value}))
        _no_raw_errors(lambda: col.get(where_document={"$contains": value}, include=[]))
        _no_raw_errors(lambda: col.facet_counts("wing", where={"room": value}))
        _no_raw_errors(lambda: col.get_recent(limit=3, where={"wing": value}))
        _no_raw_errors(lambda: col.get_recent(limit=3, order_field=value))
        _no_raw_errors(lambda: col.facet_counts(value))
    if field in ("wing", "room"):
        counts = col.facet_counts(field)
        assert sum(counts.values()) == len(HOSTILE) - sum(1 for v in HOSTILE if not isinstance(v, str))
        for value in HOSTILE:
            assert reference(value) in counts
    for i in sorted(keep)[::7]:  # delete by the id as written
        _no_raw_errors(lambda: col.delete(ids=[ids[i]]))
        assert col.get(ids=[ids[i]]).ids == []
    if field == "source_file":
        _no_raw_errors(lambda: col.delete(where={"source_file": HOSTILE[-2]}))
        assert col.get(where={"source_file": reference(HOSTILE[-2])}).ids == []


def test_update_with_hostile_text(make_collection):
    col = make_collection(name="hostile-update")
    col.add(
        ids=[f"u{i}" for i in range(len(HOSTILE))],
        documents=["x"] * len(HOSTILE),
        metadatas=[{"wing": "w"}] * len(HOSTILE),
        embeddings=vectors(len(HOSTILE)),
    )
    _no_raw_errors(
        lambda: col.update(
            ids=[f"u{i}" for i in range(len(HOSTILE))],
            documents=HOSTILE,
            metadatas=[{"note": v, v: 1} for v in HOSTILE],
        )
    )
    got = col.get(ids=[f"u{i}" for i in range(len(HOSTILE))], include=["documents", "metadatas"])
    assert got.documents == [reference(v) for v in HOSTILE]
    for meta, value in zip(got.metadatas, HOSTILE):
        assert meta["note"] == reference(value) and meta[reference(value)] == 1 and meta["wing"] == "w"


def test_builtin_pgvector_backend_stores_what_the_reference_says(builtin_pgvector_dsn, tmp_path, monkeypatch):
    """The reference functions are what MemPalace's pgvector backend really does: written through it on
    the same server, every value it can store reads back as reference() says."""
    from mempalace.backends import PalaceRef
    from mempalace.backends.pgvector import PgVectorBackend

    monkeypatch.setenv("MEMPALACE_PGVECTOR_DSN", builtin_pgvector_dsn)  # its table goes in its own schema
    backend = PgVectorBackend()
    palace = str(tmp_path / "pgvector-palace")
    col = backend.get_collection(
        palace=PalaceRef(id=palace, local_path=palace), collection_name="mempalace_drawers", create=True
    )
    try:
        stored = 0
        for i, value in enumerate(HOSTILE[:-4]):  # not the long ones: it has no index they would exceed
            col.upsert(ids=[f"p{i}"], documents=[value], metadatas=[{"note": value}], embeddings=vectors(1))
            got = col.get(ids=[f"p{i}"], include=["documents", "metadatas"])
            assert got.documents == [reference(value)] and got.metadatas[0]["note"] == reference(value)
            stored += 1
        assert stored == len(HOSTILE) - 4
    finally:
        backend.close()


@pytest.fixture
def graphs(pg_env, sqlite_kg):
    import uuid

    kg = AgeKnowledgeGraph(palace_key=f"hostile-kg-{uuid.uuid4().hex}")
    yield kg, sqlite_kg
    kg.close()


def test_every_graph_field_stores_hostile_text_like_sqlite(graphs):
    """The AGE graph fed hostile text answers as MemPalace's SQLite graph fed the reference's values."""
    age, sqlite = graphs
    for i, value in enumerate(HOSTILE):
        ref = reference(value)
        for kg, v in ((age, value), (sqlite, ref)):
            _no_raw_errors(lambda: kg.add_entity(f"{v}#{i}", entity_type=v, properties={"note": v, v: i}))
            _no_raw_errors(
                lambda: kg.add_triple(
                    f"subject {i}",
                    f"pred {v}",
                    f"{v} object",
                    valid_from="2026-01-01",
                    source_closet=v,
                    source_file=v,
                    source_drawer_id=v,
                    adapter_name=v,
                )
            )
            _no_raw_errors(lambda: kg.add_triple(f"{v}", "links", f"object {i}"))
    for i, value in enumerate(HOSTILE):
        ref = reference(value)
        for name_age, name_sqlite in (
            (f"{value}#{i}", f"{ref}#{i}"),
            (value, ref),
            (f"subject {i}", f"subject {i}"),
            (f"{value} object", f"{ref} object"),
        ):
            ours = _no_raw_errors(lambda: age.query_entity(name_age, direction="both"))
            theirs = sqlite.query_entity(name_sqlite, direction="both")
            assert sorted(map(repr, ours)) == sorted(map(repr, theirs)), (value[:40], name_sqlite[:40])
        assert _no_raw_errors(lambda: age.query_relationship(f"pred {value}")) == sqlite.query_relationship(
            f"pred {ref}"
        )
        assert _no_raw_errors(lambda: age.timeline(f"subject {i}")) == sqlite.timeline(f"subject {i}")
        if len(ref.strip()) >= 3:
            assert sorted(
                c["id"] for c in _no_raw_errors(lambda: age.find_entity_candidates(value))
            ) == sorted(c["id"] for c in sqlite.find_entity_candidates(ref))
    assert age.stats() == sqlite.stats()
    assert age.timeline(limit=1000) == sqlite.timeline(limit=1000)
    # closing and replacing facts named by hostile text
    for i, value in enumerate(HOSTILE[:12]):
        ref = reference(value)
        _no_raw_errors(
            lambda: age.invalidate(f"subject {i}", f"pred {value}", f"{value} object", ended="2026-02-01")
        )
        sqlite.invalidate(f"subject {i}", f"pred {ref}", f"{ref} object", ended="2026-02-01")
        _no_raw_errors(lambda: age.supersede(value, "links", f"object {i}", f"new {value}", at="2026-03-01"))
        sqlite.supersede(ref, "links", f"object {i}", f"new {ref}", at="2026-03-01")
    assert age.stats() == sqlite.stats()
    for value in HOSTILE[:12]:
        ref = reference(value)
        assert sorted(map(repr, age.query_entity(value, direction="both"))) == sorted(
            map(repr, sqlite.query_entity(ref, direction="both"))
        )


def test_a_palace_directory_whose_name_is_not_utf8(backend, tmp_path):
    """A palace directory named by bytes that are not UTF-8 (Python sees lone surrogates): the database
    knows it by its storable key, its marker is written and read back, reopening finds the same palace."""
    import os

    from mempalace.backends import PalaceRef

    path = os.fsdecode(bytes(tmp_path) + b"/caf\xe9-palace")
    assert "\udce9" in path
    ref = PalaceRef(id=path, local_path=path)
    col = _no_raw_errors(
        lambda: backend.get_collection(palace=ref, collection_name="mempalace_drawers", create=True)
    )
    col.add(ids=["a"], documents=["x"], metadatas=[{"wing": "w"}], embeddings=vectors(1))
    assert os.path.isfile(os.path.join(path, "mempalace_pg.json"))
    again = backend.get_collection(palace=ref, collection_name="mempalace_drawers")
    assert again.get(ids=["a"]).documents == ["x"]
    assert backend.detect(path)
    backend.close_palace(ref)
