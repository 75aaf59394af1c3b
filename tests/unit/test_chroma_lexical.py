"""The Chroma mode's scorer is MemPalace's: the same words and the same BM25 as its Chroma backend."""

from __future__ import annotations

import random

import pytest
from mempalace.backends import chroma as reference

from mempalace_pg.store.chroma_lexical import bm25_scores, words

TEXTS = [
    "PostgreSQL's pg_dump writes a database out; pg_restore reads it back.",
    "Zoë Ünicode wrote the café's menu, twice: café CAFÉ café.",
    "a b c de fgh",
    "",
    "restore restore restore the backup from 2026-12-05 at 10:00",
]


def test_words_are_mempalaces():
    for text in TEXTS:
        assert words(text) == reference._tokenize(text)


@pytest.mark.parametrize("seed", range(5))
def test_bm25_is_mempalaces(seed):
    r = random.Random(seed)
    vocabulary = [w for t in TEXTS for w in t.split()] + ["restore", "café", "pg_dump"]
    documents = [" ".join(r.choices(vocabulary, k=r.randint(0, 30))) for _ in range(40)]
    for query in ("restore café", "pg_dump", "de", "nothing here", " ".join(r.sample(vocabulary, 4))):
        assert bm25_scores(query, documents) == pytest.approx(reference._bm25_scores(query, documents))
