"""Lexical search splits words as MemPalace's other backends do (SQLite FTS5's unicode61), on real text
too."""

from __future__ import annotations

import sqlite3

import psycopg

from real_text import real_documents


def vectors(n: int) -> list:
    return [[1.0, float(i % 5), 0.5] for i in range(n)]


def test_words_inside_paths_urls_addresses_and_dotted_names_are_found(make_collection):
    col = make_collection(name="lexical-words")
    docs = {
        "path": "See docs/bash/README.Debian for the packaging notes.",
        "url": "Cloned from https://github.com/containers/buildah/blob/main/install.md today.",
        "email": "Mail jdoe@example.org about the lists.debian.org archive.",
        "code": "call os.path.join(base_dir, 'x') then my_var.split()",
        "other": "Nothing to see in this one at all.",
    }
    col.add(
        ids=list(docs),
        documents=list(docs.values()),
        metadatas=[{"wing": "w"}] * len(docs),
        embeddings=vectors(len(docs)),
    )
    for query, want in [
        ("bash", "path"),
        ("README Debian", "path"),
        ("debian packaging", "path"),
        ("buildah", "url"),
        ("containers install", "url"),
        ("github", "url"),
        ("jdoe", "email"),
        ("lists", "email"),
        ("example org", "email"),
        ("join", "code"),
        ("base_dir", "code"),
        ("my_var", "code"),
        ("split", "code"),
    ]:
        hits = [h.id for h in col.lexical_search(query=query, n_results=3).hits]
        assert hits and hits[0] == want, (query, hits)
    # the query is split by the same rule: punctuation in it separates words too
    assert col.lexical_search(query="docs/bash", n_results=1).hits[0].id == "path"
    assert col.lexical_search(query="os.path.join()", n_results=1).hits[0].id == "code"
    assert col.lexical_search(query="!!! ... ---", n_results=3).hits == []


def test_very_long_documents_are_stored_and_their_start_is_searchable(make_collection):
    import random

    rng = random.Random(7)
    words = [f"w{rng.getrandbits(40):x}" for _ in range(250_000)]  # 2.3 MB of distinct words
    col = make_collection(name="lexical-long")
    col.add(ids=["long"], documents=[" ".join(words)], metadatas=[{}], embeddings=vectors(1))
    assert len(col.get(ids=["long"]).documents[0]) == len(" ".join(words))
    assert col.lexical_search(query=words[10], n_results=1).hits[0].id == "long"


def _fts5_tokens(texts: list[str]) -> list[set]:
    """The tokens SQLite FTS5's unicode61 tokenizer (what sqlite_exact indexes) makes of each text."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(d, tokenize='unicode61 remove_diacritics 0')")
    conn.executemany("INSERT INTO t (rowid, d) VALUES (?, ?)", list(enumerate(texts, 1)))
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    out = [set() for _ in texts]
    for term, doc in conn.execute("SELECT term, doc FROM v"):
        out[doc - 1].add(term)
    return out


def test_tokens_are_those_of_sqlite_fts5_on_real_documents(make_collection, pg_dsn, pg_schema):
    """On real documentation (Debian's python3.11-doc, postgresql-doc-15), every document's words in
    document_tsv are exactly the tokens SQLite FTS5's unicode61 makes of it."""
    docs = real_documents(limit=400)
    col = make_collection(name="lexical-real")
    col.add(
        ids=[f"d{i}" for i in range(len(docs))],
        documents=[d.text for d in docs],
        metadatas=[{"source_file": d.path} for d in docs],
        embeddings=vectors(len(docs)),
    )
    with psycopg.connect(pg_dsn) as conn:
        ours = dict(
            conn.execute(
                f"SELECT r.id, tsvector_to_array(r.document_tsv) FROM {pg_schema}.records r "
                f"WHERE r.collection_pk = %s",
                (col.partition.pk,),
            ).fetchall()
        )
    theirs = _fts5_tokens([d.text[:100_000] for d in docs])
    differing = []
    for i, doc in enumerate(docs):
        a, b = set(ours[f"d{i}"]), {t for t in theirs[i] if len(t.encode()) <= 2047}
        if a != b:
            differing.append((doc.path, sorted(a - b)[:5], sorted(b - a)[:5]))
    assert not differing, f"{len(differing)} of {len(docs)} documents tokenized differently: {differing[:5]}"


def test_lexical_search_finds_every_word_of_real_documents(make_collection):
    """Any word of a real document (here: its rarest ones) finds that document first or tied first."""
    docs = real_documents(limit=300)
    col = make_collection(name="lexical-recall")
    col.add(
        ids=[f"d{i}" for i in range(len(docs))],
        documents=[d.text for d in docs],
        metadatas=[{}] * len(docs),
        embeddings=vectors(len(docs)),
    )
    tokens = _fts5_tokens([d.text for d in docs])
    seen: dict = {}
    for i, toks in enumerate(tokens):
        for t in toks:
            seen.setdefault(t, set()).add(i)
    checked = 0
    for i, toks in enumerate(tokens):
        unique = sorted(t for t in toks if len(t) >= 3 and seen[t] == {i})[:2]
        for word in unique:
            hits = col.lexical_search(query=word, n_results=1).hits
            assert hits and hits[0].id == f"d{i}", (word, docs[i].path)
            checked += 1
    assert checked > 200
