"""``lexical_search`` ranked as MemPalace's Chroma backend ranks it, for palaces that must give Chroma's
answers (setting ``lexical = "chroma"``; the default is FTS5's BM25, :mod:`mempalace_pg.store.search`).

MemPalace 3.11's Chroma backend (``ChromaCollection.lexical_search``) takes the query's words of three
or more characters, finds the drawers holding any of them as a substring (Chroma's full-text table
uses SQLite's trigram tokenizer, which matches inside words and ignores case), keeps at most 500 of
them when no filter is given, and scores those with MemPalace's own BM25 (k1 1.5, b 0.75, idf
``ln((n - df + 0.5) / (df + 0.5) + 1)``), its document frequencies and average length taken over the
matched drawers alone, words being runs of 2+ word characters. A query with no word that long falls
back to the 500 drawers filed last. This module does the same: the matching in SQL, the scoring in
Python as MemPalace scores.

Where more than 500 drawers match an unfiltered query, Chroma keeps the 500 its trigram index ranks
best, which PostgreSQL cannot rank the same way: here the 500 filed first. Every drawer is scanned
(no index holds substrings), so this mode is for palaces of the size Chroma serves, not millions.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from psycopg import sql

if TYPE_CHECKING:
    from mempalace_pg.store.partition import Partition

#: How many matching drawers MemPalace's Chroma backend scores at most (unfiltered queries).
CANDIDATES = 500
#: A query word that reaches the trigram index: three characters or more.
MATCH_MIN = 3
_WORD = re.compile(r"\w{2,}", re.UNICODE)


def words(text: str) -> list[str]:
    """The text's words as MemPalace's BM25 counts them: runs of 2+ word characters, lower-cased."""
    return _WORD.findall(text.lower()) if text else []


def bm25_scores(query: str, documents: list[str], k1: float = 1.5, b: float = 0.75) -> list[float]:
    """MemPalace's BM25 of each document for ``query``, with statistics over ``documents`` alone."""
    terms = set(words(query))
    counted = [words(doc) for doc in documents]
    lengths = [len(w) for w in counted]
    if not terms or not any(lengths):
        return [0.0] * len(documents)
    n = len(documents)
    average = sum(lengths) / n or 1.0
    df = {t: sum(1 for w in counted if t in set(w)) for t in terms}
    idf = {t: math.log((n - df[t] + 0.5) / (df[t] + 0.5) + 1.0) for t in terms}
    scores = []
    for doc_words, length in zip(counted, lengths):
        tf: dict[str, int] = {}
        for w in doc_words:
            if w in terms:
                tf[w] = tf.get(w, 0) + 1
        scores.append(
            sum(idf[t] * f * (k1 + 1) / (f + k1 * (1 - b + b * length / average)) for t, f in tf.items())
            if length
            else 0.0
        )
    return scores


def _like(word: str) -> str:
    """``word`` as an ILIKE pattern that matches it anywhere (its own % and _ taken literally)."""
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def candidates_sql(
    part: "Partition", condition: sql.Composable, params: dict, query: str, filtered: bool
) -> tuple[sql.Composable, dict]:
    """The drawers MemPalace's Chroma backend would score for ``query``: (id, document, metadata) in
    filing order, at most CANDIDATES unless ``filtered``; the newest CANDIDATES when no query word
    reaches the trigram index."""
    matchable = list(dict.fromkeys(w for w in words(query) if len(w) >= MATCH_MIN))
    if not matchable:  # the newest drawers of the collection, then the filter (as Chroma's fallback)
        return (
            sql.SQL(
                "SELECT id, document, metadata FROM (SELECT * FROM {t} WHERE collection_pk = {pk}"
                " ORDER BY written_at DESC, seq DESC LIMIT {n}) AS newest WHERE {c}"
                " ORDER BY written_at DESC, seq DESC"
            ).format(t=part.table, pk=sql.Literal(part.pk), n=sql.Literal(CANDIDATES), c=condition),
            params,
        )
    limit = sql.SQL("") if filtered else sql.SQL(" LIMIT {}").format(sql.Literal(CANDIDATES))
    return (
        sql.SQL(
            "SELECT id, document, metadata FROM {t} WHERE {c} AND document ILIKE ANY(%(chroma_words)s) "
            "ORDER BY seq{limit}"
        ).format(t=part.table, c=condition, limit=limit),
        {**params, "chroma_words": [_like(w) for w in matchable]},
    )


def ranked(query: str, rows: list[tuple], n_results: int) -> list[tuple]:
    """(id, document, metadata, score) of the best ``n_results`` of ``rows`` with a score above 0,
    best first (equal scores in the rows' order, as MemPalace's stable sort keeps them)."""
    scores = bm25_scores(query, [doc or "" for _, doc, _ in rows])
    hits = [(i, doc, meta, s) for (i, doc, meta), s in zip(rows, scores) if s > 0]
    hits.sort(key=lambda hit: hit[3], reverse=True)
    return hits[: max(0, int(n_results))]


__all__ = ["CANDIDATES", "MATCH_MIN", "words", "bm25_scores", "candidates_sql", "ranked"]
