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


def _filters_met_row_by_row(node: dict) -> int:
    """Rows returned by plan nodes that test a wing/room equality row by row (texteq: the heap arm)."""
    rows = node.get("Actual Rows", 0) if "texteq" in node.get("Filter", "") else 0
    return rows + sum(_filters_met_row_by_row(child) for child in node.get("Plans", []))


def test_a_wing_filter_samples_common_words_through_its_index_or_row_by_row(make_collection, pg_dsn):
    """Under a wing filter, a common word's sample comes from reading the word's rows and testing the
    wing on each when the wing holds a large share of the palace, through the wing's index when it
    holds a small one; either way every hit is in the wing and the rare word's drawers come first."""
    from mempalace_pg.engine import nearest
    from mempalace_pg.store import search

    words = [f"filler{i}" for i in range(40)]
    ids, docs, metas = [], [], []
    for i in range(1500):
        wing = "big" if i < 1400 else "small"
        text = " ".join(["common"] + words[i % 40 : i % 40 + 1 + i % 7])
        if i in (7, 700, 1399, 1400, 1499):
            text += " rarest"
        ids.append(f"{wing}-{i:04d}")
        docs.append(text)
        metas.append({"wing": wing, "room": f"r{i % 3}"})
    col = make_collection(name="lexical-heap")
    col.add(ids=ids, documents=docs, metadatas=metas, embeddings=vectors(len(ids)))
    rare = {"big": {"big-0007", "big-0700", "big-1399"}, "small": {"small-1400", "small-1499"}}
    row_by_row = {}
    for wing in ("big", "small"):
        hits = [
            h.id for h in col.lexical_search(query="common rarest", n_results=10, where={"wing": wing}).hits
        ]
        assert len(hits) == 10 and all(h.startswith(f"{wing}-") for h in hits), (wing, hits)
        assert set(hits[: len(rare[wing])]) == rare[wing], (wing, hits)
        gate = nearest.wing_room_gate(col.partition.index, {"wing": wing})
        condition, params = col.partition.condition({"wing": wing})
        stmt, args = search.lexical_sql(col.partition, condition, params, 10, gate=gate)
        with psycopg.connect(pg_dsn) as conn:
            plan = conn.execute(
                psycopg.sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + stmt, {**args, "text": "common rarest"}
            ).fetchone()[0]
        row_by_row[wing] = _filters_met_row_by_row(plan[0]["Plan"])
    assert row_by_row["big"] > 0 and row_by_row["small"] == 0, row_by_row
    # a wing and a room: the same rule, every hit in both
    where = {"$and": [{"wing": "big"}, {"room": "r1"}]}
    hits = col.lexical_search(query="common rarest", n_results=10, where=where).hits
    assert len(hits) == 10 and all(h.metadata["wing"] == "big" and h.metadata["room"] == "r1" for h in hits)
    assert hits[0].id == "big-0007"


def test_scores_are_sqlite_fts5_bm25_on_real_documents(make_collection, pg_dsn, pg_schema):
    """On real documentation, where every query word is found in fewer documents than the cap (so every
    document holding one is scored), lexical_search ranks and scores as SQLite FTS5's bm25() does on the
    same text: same top 10, scores equal to -bm25() within float rounding. And facet_counts.tokens holds
    the documents' words together, as FTS5 counts them, through adds, updates and deletes."""
    import random

    docs = real_documents(limit=400)
    texts = [d.text for d in docs]
    col = make_collection(name="lexical-bm25")
    ids = [f"d{i}" for i in range(len(docs))]
    col.add(ids=ids, documents=texts, metadatas=[{"wing": "w"}] * len(docs), embeddings=vectors(len(docs)))
    # FTS5 over the same texts, after an update and a delete done to both
    col.update(ids=["d0"], documents=[texts[1] + " " + texts[2]])
    texts[0] = texts[1] + " " + texts[2]
    col.delete(ids=["d3"])
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(d, tokenize='unicode61 remove_diacritics 0')")
    conn.executemany(
        "INSERT INTO t (rowid, d) VALUES (?, ?)", [(i, x) for i, x in enumerate(texts) if i != 3]
    )
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
    total_words = conn.execute("SELECT sum(cnt) FROM v").fetchone()[0]
    with psycopg.connect(pg_dsn) as pg:
        kept = pg.execute(
            f"SELECT sum(n), sum(tokens) FROM {pg_schema}.facet_counts WHERE collection_pk = %s",
            (col.partition.pk,),
        ).fetchone()
    assert kept == (len(texts) - 1, total_words)

    rng = random.Random(29)
    df = dict(conn.execute("SELECT term, doc FROM v").fetchall())
    words = sorted(w for w, n in df.items() if len(w) >= 3 and 2 <= n < 100 and w.isalpha())
    compared = 0
    for _ in range(30):
        query = rng.sample(words, rng.choice((2, 3)))
        found = conn.execute(
            "SELECT rowid, -bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 30",
            (" OR ".join(f'"{w}"' for w in query),),
        ).fetchall()
        # equal scores in our order (the id as text), as lexical_search breaks ties
        theirs = sorted(((f"d{r}", x) for r, x in found), key=lambda h: (-round(h[1], 9), h[0]))[:10]
        ours = [(h.id, h.score) for h in col.lexical_search(query=" ".join(query), n_results=10).hits]
        assert [i for i, _ in ours] == [i for i, _ in theirs], (query, ours, theirs)
        for (_, a), (_, b) in zip(ours, theirs):
            assert abs(a - b) <= 1e-6 * max(1.0, abs(b)), (query, ours, theirs)
        compared += 1
    assert compared == 30


def test_common_words_are_counted_exactly_and_scored_with_their_counts(
    make_collection, pg_dsn, pg_schema, monkeypatch
):
    """The `analyze` maintenance counts every word found in at least LEXICAL_DF_CAP documents, exactly
    as FTS5 counts them (lexical_common_words); a search scores such words with those counts, so each
    hit's score is FTS5's bm25() for that document. The folder's recount waits for the collection to
    grow by LEXICAL_RECOUNT_GROWTH. (A cap of 20 makes common words of 400 real documents.)"""
    import random

    from mempalace_pg.engine import words
    from mempalace_pg.store import search

    monkeypatch.setattr(search, "LEXICAL_DF_CAP", 20)
    monkeypatch.setattr(words, "LEXICAL_DF_CAP", 20)
    docs = real_documents(limit=400)
    texts = [d.text for d in docs]
    col = make_collection(name="lexical-common")
    col.add(
        ids=[f"d{i}" for i in range(len(texts))],
        documents=texts,
        metadatas=[{"wing": "w"}] * len(texts),
        embeddings=vectors(len(texts)),
    )
    assert col.run_maintenance("analyze").status == "ran"
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(d, tokenize='unicode61 remove_diacritics 0')")
    conn.executemany("INSERT INTO t (rowid, d) VALUES (?, ?)", list(enumerate(texts)))
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
    df = dict(conn.execute("SELECT term, doc FROM v").fetchall())
    with psycopg.connect(pg_dsn) as pg:
        kept = pg.execute(
            f"SELECT word, docs, documents FROM {pg_schema}.lexical_common_words WHERE collection_pk = %s",
            (col.partition.pk,),
        ).fetchall()
    assert {w: n for w, n, _ in kept} == {w: n for w, n in df.items() if n >= 20}
    assert {d for _, _, d in kept} == {len(texts)}
    common = sorted(w for w, n in df.items() if n >= 40 and len(w) >= 3 and w.isalpha())
    rarer = sorted(w for w, n in df.items() if 3 <= n < 20 and len(w) >= 3 and w.isalpha())
    assert len(common) >= 10 and len(rarer) >= 10

    rng = random.Random(31)
    for _ in range(20):
        query = rng.sample(common, rng.choice((1, 2))) + rng.sample(rarer, rng.choice((0, 1)))
        theirs = dict(
            conn.execute(
                "SELECT rowid, -bm25(t) FROM t WHERE t MATCH ?", (" OR ".join(f'"{w}"' for w in query),)
            ).fetchall()
        )
        hits = col.lexical_search(query=" ".join(query), n_results=10).hits
        assert len(hits) == 10, query
        for h in hits:
            want = theirs[int(h.id[1:])]
            assert abs(h.score - want) <= 1e-6 * max(1.0, abs(want)), (query, h.id, h.score, want)

    # the folder's recount: not until the collection has grown by the share
    with psycopg.connect(pg_dsn, autocommit=True) as pg:
        recount = f"SELECT {pg_schema}.remember_common_words(%s, 20, %s)"
        assert pg.execute(recount, (col.partition.pk, words.LEXICAL_RECOUNT_GROWTH)).fetchone()[0] is None
        more = int(len(texts) * words.LEXICAL_RECOUNT_GROWTH) + 1
        col.add(
            ids=[f"e{i}" for i in range(more)],
            documents=texts[:more],
            metadatas=[{"wing": "w"}] * more,
            embeddings=vectors(more),
        )
        assert pg.execute(recount, (col.partition.pk, words.LEXICAL_RECOUNT_GROWTH)).fetchone()[0] > 0
        documents = pg.execute(
            f"SELECT DISTINCT documents FROM {pg_schema}.lexical_common_words WHERE collection_pk = %s",
            (col.partition.pk,),
        ).fetchall()
    assert documents == [(len(texts) + more,)]


def test_the_chroma_mode_gives_the_hits_of_mempalaces_chroma_backend(make_collection, tmp_path):
    """With ``lexical = "chroma"`` lexical_search answers as MemPalace's Chroma backend does on the same
    drawers: the same hits with the same scores, with and without a filter, and for a query whose words
    are too short for Chroma's trigram index (its fallback to the newest drawers)."""
    import random

    from mempalace.backends import PalaceRef
    from mempalace.backends.chroma import ChromaBackend

    docs = real_documents(limit=240)
    rows = {
        "ids": [f"d{i}" for i in range(len(docs))],
        "documents": [d.text for d in docs],
        "metadatas": [{"wing": "a" if i % 3 else "b"} for i in range(len(docs))],
        "embeddings": vectors(len(docs)),
    }
    ours = make_collection(name="lexical-as-chroma", options={"lexical": "chroma"})
    ours.add(**rows)
    where = tmp_path / "chroma"
    chroma = ChromaBackend().get_collection(
        palace=PalaceRef(id=str(where), local_path=str(where)),
        collection_name="mempalace_drawers",
        create=True,
    )
    chroma.add(**rows)
    r = random.Random(4)
    words = sorted({w for d in docs for w in d.text.lower().split() if w.isalpha() and len(w) >= 4})
    queries = [" ".join(r.sample(words, k)) for k in (1, 2, 3) for _ in range(8)]
    queries += ["the configuration", "pg_dump restore", "an of to", "Python's DEFAULT"]
    compared = 0
    for query in queries:
        for filter_ in (None, {"wing": "b"}):
            want = chroma.lexical_search(query=query, n_results=500, where=filter_).hits
            got = ours.lexical_search(query=query, n_results=500, where=filter_).hits
            # equal scores may come in another order (the two stores file rows in their own order)
            assert sorted((round(h.score, 9), h.id) for h in got) == sorted(
                (round(h.score, 9), h.id) for h in want
            ), (query, filter_)
            assert [round(h.score, 9) for h in got] == [round(h.score, 9) for h in want]
            compared += bool(want)
    assert compared >= 40
    # the default ranks by FTS5's BM25: other scores for the same query
    default = make_collection(name="lexical-default")
    default.add(**rows)
    assert [h.score for h in default.lexical_search(query=queries[8], n_results=5).hits] != [
        h.score for h in ours.lexical_search(query=queries[8], n_results=5).hits
    ]
