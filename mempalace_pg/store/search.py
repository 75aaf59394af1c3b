"""Words ranked like BM25 over a collection's partition, and the key ``query()`` keeps its statement under.

The lexical statement is one SQL statement, usable on its own (``lexical_search``) or as a subquery of a
larger one (:mod:`mempalace_pg.retrieval` joins it with the graph). The nearest-vector statement is
:mod:`mempalace_pg.engine.nearest`'s.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Optional

from mempalace.backends.base import _IncludeSpec
from psycopg import sql

from mempalace_pg.engine.nearest import Gate
from mempalace_pg.engine.words import LEXICAL_DF_CAP

if TYPE_CHECKING:
    from mempalace_pg.store.partition import Partition

#: Lexical search: a word in at least LEXICAL_DF_CAP documents is common: its documents are not
#: counted further, and LEXICAL_CANDIDATES of them (or 4 x n_results) are sampled as candidates; every
#: document of a rarer word is scored. The cap trades agreement with exact BM25 for speed (see the
#: lexical section of benchmarks/RESULTS.md); tests/integration/test_contract.py checks the agreement.
LEXICAL_CANDIDATES = 50
#: Lexical search reads at most this many distinct words of a query, the first ones in the query's
#: order: each word costs a count of its documents, so a pasted page (thousands of words) would run
#: past the statement timeout where a sentence takes milliseconds. MemPalace's own MCP search keeps
#: at most 250 characters of a query (query_sanitizer.MAX_QUERY_LENGTH), about 40 words.
LEXICAL_QUERY_WORDS = 64
#: A word that lexical_common_words (sql/0012) lists at LEXICAL_KNOWN_COMMON x LEXICAL_DF_CAP documents
#: or more takes its listed share of the collection without being counted: the margin keeps a word
#: near the cap, whose listed share may be a little stale, counted as before.
LEXICAL_KNOWN_COMMON = 2
#: Lexical search under a wing/room filter: a common word's sample is taken by reading the word's rows
#: and testing the filter on each (instead of ANDing the word's bitmap with the filter index's) when
#: the filter matches at least sqrt(LEXICAL_HEAP_FILTER x sample x records) records, i.e. when the
#: rows read to fill the sample are fewer than 1/LEXICAL_HEAP_FILTER of the filter's index entries,
#: which is where reading a row and reading that many index entries cost about the same (the lexical
#: section of benchmarks/RESULTS.md).
LEXICAL_HEAP_FILTER = 12
#: Lexical search scores by BM25 only the LEXICAL_RERANK candidates (or 4 x n_results) that rank
#: best by idf x ts_rank, a cheaper score that reads no more than the tsvector's header and the
#: query's own words: BM25's count of each word and its length term cost several times as much per
#: candidate, and the top 10 it keeps were the same on the lexical benchmark's queries (0: all).
LEXICAL_RERANK = 100
#: In a query with a common word, the documents holding two of its LEXICAL_PAIR_WORDS rarest words
#: are candidates too, up to LEXICAL_PAIR_CANDIDATES; when they are at least a common word's
#: sample (LEXICAL_CANDIDATES or 4 x n_results), the common words' own samples are not taken: the
#: documents holding two words outscore those holding one, and the samples cost a GIN scan each.
LEXICAL_PAIR_WORDS = 4
LEXICAL_PAIR_CANDIDATES = 500
#: The pairs are of the query's LEXICAL_PAIR_WORDS rarest words (highest idf), and a common word is
#: sampled only when its idf is at least LEXICAL_SAMPLE_IDF_SHARE of the query's highest: a document
#: holding only a word that much commoner cannot reach the documents of the rarer ones, and sampling a
#: very common word costs a GIN scan of its whole posting list.
LEXICAL_SAMPLE_IDF_SHARE = 0.25
#: BM25's parameters, SQLite FTS5's (bm25()): term-frequency saturation and length normalisation.
BM25_K1 = 1.2
BM25_B = 0.75


def query_key(where, where_document, spec: _IncludeSpec, n: int, dim: int):
    """The key query()'s statement is kept under (with the index layout): its filters spelled as JSON,
    what it returns and how many; None for a filter value JSON cannot spell exactly (built every time,
    never kept)."""
    try:
        filters = json.dumps([where, where_document], sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return (filters, spec.documents, spec.metadatas, spec.embeddings, n, dim)


def lexical_sql(
    part: Partition,
    condition: sql.Composable,
    cparams: dict,
    n: int,
    *,
    rows: bool = True,
    gate: Optional[Gate] = None,
) -> tuple[sql.Composable, dict]:
    """The statement (also usable as a subquery) ranking records that meet ``condition`` (whose
    parameters are ``cparams``) by the words of the query text (the parameter ``text``, which the
    caller adds): id, document, metadata, score, best first (``rows=False``: id and score only).
    Returns the statement and its parameters but ``text``. ``gate``: the filter's wing/room gate
    (:func:`mempalace_pg.engine.nearest.wing_room_gate`), which lets a common word's sample be filtered
    row by row when the filter matches a large share (LEXICAL_HEAP_FILTER).

    The query is split into words in SQL, by the function that splits the documents
    (lexical_text(), sql/0006), and its words of two or more characters are searched (MemPalace's
    BM25 ignores shorter ones)."""
    db = part.db
    per_word = max(LEXICAL_CANDIDATES, 4 * n)
    args = {**cparams, "pk": part.pk, "df_cap": LEXICAL_DF_CAP, "per_word": per_word, "lexical_n": n}
    # A rare word's rows are few (under LEXICAL_DF_CAP): they are read and the filter tested on each;
    # the subquery's OFFSET 0 keeps PostgreSQL from ANDing the word's bitmap with a filter index's,
    # which for a wing reads every index entry of the wing.
    rare = sql.SQL(
        "SELECT id, document_tsv AS tsv"
        "    FROM (SELECT * FROM {t} WHERE document_tsv @@ weighted.q OFFSET 0) AS r"
        "    WHERE weighted.df < %(df_cap)s AND {cond}"
    )
    # A common word: a sample of per_word rows that meet the filter, through the planner's choice of
    # indexes; under a gate whose filter matches a large share, by reading the word's rows and testing
    # the filter's equalities (written so that no index serves them) until the sample is full.
    common = sql.SQL(
        "SELECT id, document_tsv AS tsv FROM {t}"
        "    WHERE weighted.df >= %(df_cap)s AND document_tsv @@ weighted.q AND {cond}{indexed}"
        "    LIMIT %(per_word)s"
    )
    # A common word's sample is taken unless the pairs fill one, and, when it is much commoner than
    # the query's rarest word, unless the rarer words' documents fill one (LEXICAL_SAMPLE_IDF_SHARE).
    sampled = sql.SQL(
        " WHERE (SELECT count(*) FROM paired) < %(per_word)s AND (weighted.idf >= weighted.top_idf * {share}"
        " OR (SELECT count(*) FROM rare_hits) < %(per_word)s)"
    ).format(share=sql.Literal(LEXICAL_SAMPLE_IDF_SHARE))
    gate_cte = sql.SQL("")
    heap_arm = sql.SQL("")
    indexed = sql.SQL("")
    if gate is not None and gate.walk_condition is not None:
        args.update(gate.params)
        gate_cte = sql.SQL(" matching AS MATERIALIZED ({}),").format(gate.count)
        wide = sql.SQL(
            "(SELECT n FROM matching) * (SELECT n FROM matching)"
            " >= {r} * %(per_word)s * (SELECT n FROM total)"
        ).format(r=sql.Literal(LEXICAL_HEAP_FILTER))
        indexed = sql.SQL(" AND NOT {}").format(wide)
        # the same sample, its filter written as the walks test it, taken when the filter is wide
        heap_arm = sql.SQL(
            "  UNION ALL  SELECT c.id, c.tsv FROM weighted CROSS JOIN LATERAL ({}) AS c{}"
        ).format(
            common.format(
                t=part.table,
                cond=gate.walk_condition,
                indexed=sql.SQL(" AND {}").format(wide),
            ),
            sampled,
        )
    # Per word: its document frequency, counted through the GIN index up to LEXICAL_DF_CAP; a word
    # found that often takes its share of the collection as last counted (lexical_common_words), else
    # the frequency ANALYZE saw for it (pg_stats' most common elements of the partition's tsvector),
    # else the cap; a word kept far above the cap (LEXICAL_KNOWN_COMMON) is not
    # counted. Then FTS5's idf, and candidates: every document of a rare word, a bounded sample of a
    # common one. Each candidate is scored by BM25 as SQLite FTS5's bm25() scores (k1, b, idf floored
    # just above zero) from the tsvector its scan already read: the query words' counts (ts_filter
    # keeps only them), the document's length (lexical_length) against the average kept in
    # facet_counts; with pairs of the query's words as candidates too (LEXICAL_PAIR_WORDS) and only
    # the best by idf x ts_rank scored by BM25 (LEXICAL_RERANK). Only the best n are then looked up
    # by id for their document and metadata. (Table {t} is the collection's own partition, so
    # counting needs no collection_pk test.)
    stmt = sql.SQL(
        "WITH total AS (SELECT GREATEST(COALESCE(sum(n), 0), 1)::float8 AS n,"
        "   GREATEST(COALESCE(sum(tokens), 0), 1)::float8 / GREATEST(COALESCE(sum(n), 0), 1) AS avgdl"
        "  FROM {counts} WHERE collection_pk = %(pk)s),{gate_cte}"
        # read only when a word reaches the cap (a CTE runs when first read)
        " common_words AS MATERIALIZED (SELECT e.word, e.freq FROM pg_catalog.pg_stats AS s,"
        "   unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS e(word, freq)"
        "  WHERE s.schemaname = %(stats_schema)s AND s.tablename = %(stats_table)s"
        "  AND s.attname = 'document_tsv'),"
        " weighted AS MATERIALIZED (SELECT word, q, df, idf,"
        "  row_number() OVER (ORDER BY idf DESC, word) AS rank, max(idf) OVER () AS top_idf FROM ("
        "  SELECT word, q, df, GREATEST(ln((total.n - df + 0.5) / (df + 0.5)), 1e-6) AS idf"
        "  FROM (SELECT words.word, words.q, CASE WHEN kept.known THEN kept.df"
        "    WHEN counted.n < %(df_cap)s THEN counted.n"
        "    ELSE GREATEST(%(df_cap)s, COALESCE(kept.df, (SELECT c.freq * total.n FROM common_words AS c"
        "     WHERE c.word = words.word), 0)) END AS df"
        # the query's first LEXICAL_QUERY_WORDS distinct words, in the order it gives them
        "   FROM (SELECT w AS word, quote_literal(w)::tsquery AS q"
        "    FROM unnest(to_tsvector('simple', {lexical_text}(%(text)s::text))) AS v(w, positions, weights)"
        "    WHERE length(w) >= 2 ORDER BY positions[1] LIMIT {query_words}) AS words"
        "   CROSS JOIN total"
        # a word kept as common (lexical_common_words, sql/0012) far above the cap is not counted
        "   CROSS JOIN LATERAL (SELECT k.share * total.n AS df,"
        "     COALESCE(k.share * total.n >= {known} * %(df_cap)s, false) AS known"
        "     FROM (SELECT 1) AS one LEFT JOIN (SELECT word, docs::float8 / documents AS share"
        "      FROM {common_kept} WHERE collection_pk = %(pk)s) AS k"
        "     ON k.word = words.word) AS kept"
        "   CROSS JOIN LATERAL (SELECT count(*)::float8 AS n FROM (SELECT 1 FROM {t}"
        "     WHERE NOT kept.known AND document_tsv @@ words.q LIMIT %(df_cap)s) AS m) AS counted"
        # OFFSET 0: df is worked out once per word, not once for each place the formula names it
        "   WHERE numnode(words.q) > 0 OFFSET 0) AS f CROSS JOIN total) AS i),"
        " query_words AS (SELECT array_agg(word) AS words,"
        "   string_agg(quote_literal(word), ' | ')::tsquery AS q FROM weighted),"
        # When a word is common, its sample is blind to the other words; in a query of a few words,
        # the documents holding two of them are where BM25's best lie, and the GIN index finds them in
        # one scan of (a & b) | (a & c) | ...; when they fill a sample, the samples are not taken.
        " pairs AS (SELECT string_agg('(' || a.q::text || ' & ' || b.q::text || ')', ' | ')::tsquery AS q"
        "  FROM weighted AS a JOIN weighted AS b ON a.word < b.word"
        "  WHERE EXISTS (SELECT 1 FROM weighted WHERE df >= %(df_cap)s)"
        "  AND a.rank <= {pair_words} AND b.rank <= {pair_words}),"
        " paired AS MATERIALIZED (SELECT c.id, c.tsv FROM pairs CROSS JOIN LATERAL ("
        "   SELECT id, document_tsv AS tsv FROM {t}"
        "   WHERE document_tsv @@ pairs.q AND {cond} LIMIT {pair_n}) AS c WHERE pairs.q IS NOT NULL),"
        " rare_hits AS MATERIALIZED (SELECT c.id, c.tsv FROM weighted CROSS JOIN LATERAL ({rare}) AS c),"
        " candidates AS ("
        "  SELECT id, tsv FROM rare_hits"
        "  UNION ALL"
        "  SELECT c.id, c.tsv FROM weighted CROSS JOIN LATERAL ({common}) AS c{sampled}"
        "{heap_arm}"
        "  UNION ALL"
        "  SELECT id, tsv FROM paired),"
        # a candidate's length as lexical_length() reads it, through the query's own words (which it
        # holds): the ratio of its rank without and with ts_rank's length normalisation (worked out
        # for the candidates the cheap score keeps, not for all)
        " measured AS (SELECT d.id, d.tsv, round(ts_rank(d.tsv, query_words.q, 0)::float8"
        "   / ts_rank(d.tsv, query_words.q, 2)::float8) AS dl"
        '  FROM (SELECT id, tsv FROM (SELECT DISTINCT ON (id COLLATE "C") id, tsv FROM candidates'
        '   ORDER BY id COLLATE "C") AS u{prerank} OFFSET 0) AS d'
        "  CROSS JOIN query_words),"
        " scored AS ("
        "  SELECT d.id, (SELECT sum(w.idf * t.tf * (%(k1)s + 1)"
        "      / (t.tf + %(k1)s * (1 - %(b)s + %(b)s * d.dl / total.avgdl)))"
        "    FROM (SELECT lexeme, COALESCE(array_length(positions, 1), 1)::float8 AS tf"
        "     FROM unnest(ts_filter(setweight(d.tsv, 'A', query_words.words), '{{a}}'))) AS t"
        "    JOIN weighted AS w ON w.word = t.lexeme) AS score"
        "  FROM measured AS d CROSS JOIN total CROSS JOIN query_words"
        "  ORDER BY score DESC, d.id LIMIT %(lexical_n)s)"
    ).format(
        t=part.table,
        counts=db.ident("facet_counts"),
        common_kept=db.ident("lexical_common_words"),
        known=sql.Literal(LEXICAL_KNOWN_COMMON),
        gate_cte=gate_cte,
        rare=rare.format(t=part.table, cond=condition),
        common=common.format(t=part.table, cond=condition, indexed=indexed),
        heap_arm=heap_arm,
        cond=condition,
        pair_words=sql.Literal(LEXICAL_PAIR_WORDS),
        query_words=sql.Literal(LEXICAL_QUERY_WORDS),
        pair_n=sql.Literal(LEXICAL_PAIR_CANDIDATES),
        lexical_text=db.ident("lexical_text"),
        sampled=sampled,
        prerank=sql.SQL(
            " ORDER BY (SELECT sum(w.idf * ts_rank(u.tsv, w.q, 1)) FROM weighted AS w) DESC LIMIT {}"
        ).format(sql.Literal(max(LEXICAL_RERANK, 4 * n)))
        if LEXICAL_RERANK
        else sql.SQL(""),
    )
    args.update({"k1": BM25_K1, "b": BM25_B, "stats_schema": db.schema, "stats_table": part.table_name})
    if not rows:
        return stmt + sql.SQL(" SELECT id, score FROM scored ORDER BY score DESC, id"), args
    return stmt + sql.SQL(
        " SELECT r.id, r.document, r.metadata, s.score"
        " FROM scored AS s JOIN {t} AS r ON r.collection_pk = %(pk)s AND r.id = s.id"
        " ORDER BY s.score DESC, r.id"
    ).format(t=part.table), args


__all__ = [
    "BM25_B",
    "BM25_K1",
    "LEXICAL_CANDIDATES",
    "LEXICAL_HEAP_FILTER",
    "LEXICAL_KNOWN_COMMON",
    "LEXICAL_QUERY_WORDS",
    "lexical_sql",
    "query_key",
]
