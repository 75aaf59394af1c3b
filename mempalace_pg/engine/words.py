"""The common-word statistics lexical search reads: which words a collection's documents hold so often
that counting them per query would cost more than it tells (``lexical_common_words``, sql/0012).

Kept by whoever changes a collection wholesale (a bulk load, ``reindex``, ``analyze``) and by the vector
index folder as the collection grows; read by the lexical search statement
(:mod:`mempalace_pg.store.search`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

if TYPE_CHECKING:
    import psycopg

#: Lexical search: a word in at least LEXICAL_DF_CAP documents is common (see
#: :mod:`mempalace_pg.store.search`, which counts a rarer word's documents per query).
LEXICAL_DF_CAP = 500
#: The vector index folder recounts the common words (remember_common_words) when the collection has
#: grown by this share since they were counted: each count is one scan of the collection's words, and
#: the scans of a growing palace then add up to a few times one scan of it.
LEXICAL_RECOUNT_GROWTH = 0.25


def remember_common_words(conn: psycopg.Connection, schema: str, pk: int, *, min_growth: float = 0.0) -> None:
    """Count exactly the words found in at least LEXICAL_DF_CAP of a collection's documents, for lexical
    search's document frequencies (lexical_common_words, sql/0012): one scan of the collection's words.
    ``min_growth`` > 0: only when the collection has grown by that share since the last count. ``conn``
    commits it (autocommit, or the caller's transaction)."""
    conn.execute(
        sql.SQL("SELECT {}(%s, %s, %s)").format(sql.Identifier(schema, "remember_common_words")),
        (pk, LEXICAL_DF_CAP, min_growth),
    )


__all__ = ["LEXICAL_DF_CAP", "LEXICAL_RECOUNT_GROWTH", "remember_common_words"]
