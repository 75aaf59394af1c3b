"""The search statements over a collection's partition: nearest vectors, and words ranked like BM25.

Each is one SQL statement, usable on its own (``PostgresCollection.query`` and ``lexical_search``)
or as a subquery of a larger one (:mod:`mempalace_pg.retrieval` joins them with the graph).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from mempalace.backends.base import _IncludeSpec
from psycopg import sql

from mempalace_pg.db.sqlkit import MAX_ROW_COUNT, Kept, StatementCache, row_count
from mempalace_pg.store import indexing

if TYPE_CHECKING:
    import psycopg

    from mempalace_pg.store.partition import Partition

#: A filtered query takes this many times n_results candidates from the index before re-ranking: the
#: iterative scan returns batches out of order, and a few more candidates put the best ones back in
#: (see "Backends at 100,000 drawers" in benchmarks/RESULTS.md for the recall this gives).
FILTERED_OVERSAMPLE = 2
#: A query whose filter matches at most this many records is answered by an exact scan.
EXACT_SCAN_MAX = 3000
#: A query unfiltered or filtered by wing and room ranks the tail (rows no index segment holds yet) by
#: the Hamming distance of their binary-quantized vectors (vector_tail, sql/0014) first, and re-ranks by
#: the exact distance the TAIL_OVERSAMPLE x n_results (at least TAIL_CANDIDATES) that rank best:
#: reading the narrow table costs a fraction of reading every tail row, and the re-rank puts back the
#: order the sign bits blur (bench_scale in benchmarks/RESULTS.md). Other filters scan the rows they
#: leave exactly.
TAIL_OVERSAMPLE = 40
TAIL_CANDIDATES = 400
#: Lexical search: a word in at least LEXICAL_DF_CAP documents is common: its documents are not
#: counted further, and LEXICAL_CANDIDATES of them (or 4 x n_results) are sampled as candidates; every
#: document of a rarer word is scored. The cap trades agreement with exact BM25 for speed (see the
#: lexical section of benchmarks/RESULTS.md); tests/integration/test_contract.py checks the agreement.
LEXICAL_DF_CAP = 500
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
#: The vector index folder recounts the common words (remember_common_words) when the collection has
#: grown by this share since they were counted: each count is one scan of the collection's words, and
#: the scans of a growing palace then add up to a few times one scan of it.
LEXICAL_RECOUNT_GROWTH = 0.25
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


@dataclass(frozen=True)
class Gate:
    """How a filtered nearest-neighbour statement picks its arms: ``count`` (SQL of one row with a column
    ``n``, parameters ``params``) is how many records the filter can match; at most EXACT_SCAN_MAX and
    they are scanned exactly (found through the filter's B-tree index), otherwise the vector index is
    walked. ``walk_condition``, when given, is the filter as the walks test it, in a form no index
    serves and whose share PostgreSQL does not estimate: the gate has already chosen the walk, and
    PostgreSQL, which costs a filtered HNSW walk as if it read the whole graph once few records match,
    would otherwise trade it for a scan of the filter's matches (or of the whole segment) and a sort."""

    count: sql.Composable
    params: dict
    walk_condition: Optional[sql.Composable] = None
    #: the filter's equalities, when it is exactly these (``{"wing": w, "room": r}``, either or both):
    #: the tail's first pass applies them to vector_tail's copies of the columns
    keys: Optional[dict] = None


def wing_room_gate(part: Partition, keys: Optional[dict]) -> Optional[Gate]:
    """The gate of a wing/room filter ``keys`` (see :func:`mempalace_pg.store.filters.wing_room_equalities`),
    counted from the trigger-kept facet_counts; None for no such filter."""
    if not keys:
        return None
    key_filter, key_params = part.facet_key_filter(keys)
    # texteq(a, b) is a = b as a function call: no index serves it, and PostgreSQL gives it the default
    # selectivity of a boolean function (a third) instead of its estimate of the values' share.
    walk = [sql.SQL("collection_pk = {}").format(sql.Literal(part.pk))]
    walk += [
        sql.SQL("pg_catalog.texteq({}, {}::text)").format(sql.Identifier(k), sql.Placeholder(f"walk_{k}"))
        for k in keys
    ]
    return Gate(
        sql.SQL("SELECT COALESCE(sum(n), 0) AS n FROM {} WHERE collection_pk = %(pk)s {}").format(
            part.db.ident("facet_counts"), key_filter
        ),
        {"pk": part.pk, **key_params, **{f"walk_{k}": v for k, v in keys.items()}},
        sql.SQL(" AND ").join(walk),
        dict(keys),
    )


# Long because its SQL is written out clause by clause; its arms are built in one loop.
def nearest_sql(
    part: Partition,
    *,
    columns: sql.Composable,
    condition: sql.Composable,
    params: dict,
    n: int,
    dim: int,
    filtered: bool,
    gate: Optional[Gate] = None,
    layout: Optional[indexing.Layout] = None,
) -> tuple[sql.Composable, dict]:
    """The statement (also usable as a subquery) of the ``n`` records nearest to the query vector
    (the parameter ``q``, which the caller adds) that meet ``condition`` (whose parameters are
    ``params``): ``columns`` plus ``distance``, nearest first. Returns the statement and its
    parameters but ``q``.

    One arm per vector index segment of ``layout`` (default: the partition's current one; a caller that
    keeps the statement keeps it per layout), each walking its HNSW graph with an iterative scan so
    a filter still fills n; one exact scan over the tail, the rows no segment holds yet; and, when
    ``gate`` (a :class:`Gate`) says at most EXACT_SCAN_MAX records match, an exact scan instead of all
    of them: scanning a thousand rows by B-tree beats walking the graphs for them, at recall 1.0. Arms
    not taken are cut off by one-time filters, inside the same statement. The index arms walk
    half-precision graphs and re-rank by the exact distance; a filtered search takes FILTERED_OVERSAMPLE
    times the candidates first, which lifts recall.

    The row counts and segment bounds are written into the statement (see :func:`row_count`), so
    that PostgreSQL plans it once, matches each arm to its partial index, and reuses the plan.
    """
    layout = layout or part.layout()
    fmt = dict(
        cols=columns,
        vt=part.vector_type(dim),
        ht=part.half_type(dim),
        t=part.table,
        cond=condition,
        n=row_count(n),
    )
    # each segment holds a share of the matches: it oversamples by that share (at least n)
    candidates = row_count(
        min(MAX_ROW_COUNT, max(n, math.ceil(FILTERED_OVERSAMPLE * n * layout.largest))) if filtered else n
    )
    parts, params, arms = [], dict(params), []
    gate_ann = sql.SQL("")
    walk = dict(fmt)  # the walks' and the tail's
    if gate is not None:
        params.update(gate.params)
        gate_ann = sql.SQL(" AND (SELECT n FROM matching) > {}").format(sql.Literal(EXACT_SCAN_MAX))
        if gate.walk_condition is not None:
            walk["cond"] = gate.walk_condition
        parts.append(sql.SQL("matching AS MATERIALIZED ({})").format(gate.count))
        parts.append(
            sql.SQL(
                "exact AS MATERIALIZED ("
                " SELECT {cols}, (embedding::{vt} <=> %(q)s::{vt}) AS distance FROM {t}"
                " WHERE {cond} AND (SELECT n FROM matching) <= {max} ORDER BY distance, id LIMIT {n})"
            ).format(max=sql.Literal(EXACT_SCAN_MAX), **fmt)
        )
        arms.append("exact")
    for i, (lo, hi) in enumerate(layout.segments):
        arm = f"segment_{i}"
        parts.append(
            sql.SQL(
                "{arm} AS MATERIALIZED ("
                " SELECT {cols}, (embedding::{vt} <=> %(q)s::{vt}) AS distance FROM {t}"
                " WHERE {seg} AND {cond}{gate} ORDER BY embedding::{ht} <=> %(q)s::{ht} LIMIT {k})"
            ).format(
                arm=sql.Identifier(arm),
                seg=indexing.segment_condition(lo, hi),
                gate=gate_ann,
                k=candidates,
                **walk,
            )
        )
        arms.append(arm)
    tail = indexing.tail_condition(layout)
    keys = {} if not filtered else (gate.keys if gate is not None else None)
    if keys is not None and dim <= indexing.HNSW_MAX_DIM:
        # the first pass over the narrow table (with the filter's wing and room, when it is those),
        # then the rows it picked (vector_seq = ANY: by index), which meet the whole condition
        equal = sql.SQL("").join(
            sql.SQL(" AND {} = {}").format(sql.Identifier(k), sql.Placeholder(f"walk_{k}")) for k in keys
        )
        tail = sql.SQL(
            "vector_seq = ANY (ARRAY(SELECT vector_seq FROM {bits} WHERE collection_pk = {pk} AND {tail}{eq}"
            " ORDER BY bits <~> (SELECT binary_quantize(%(q)s::{vt})::bit varying) LIMIT {k})) AND {tail}"
        ).format(
            bits=part.db.ident("vector_tail"),
            pk=sql.Literal(part.pk),
            tail=tail,
            eq=equal,
            vt=fmt["vt"],
            k=row_count(min(MAX_ROW_COUNT, max(TAIL_CANDIDATES, TAIL_OVERSAMPLE * n))),
        )
    parts.append(
        sql.SQL(
            "tail AS MATERIALIZED ("
            " SELECT {cols}, (embedding::{vt} <=> %(q)s::{vt}) AS distance FROM {t}"
            " WHERE {tail} AND {cond}{gate} ORDER BY distance LIMIT {n})"
        ).format(tail=tail, gate=gate_ann, **walk)
    )
    arms.append("tail")
    union = sql.SQL(" UNION ALL ").join(sql.SQL("SELECT * FROM {}").format(sql.Identifier(a)) for a in arms)
    query = sql.SQL("WITH {} SELECT * FROM ({}) AS hits ORDER BY distance + 0, id LIMIT {}").format(
        sql.SQL(", ").join(parts), union, row_count(n)
    )
    return query, params


def query_key(where, where_document, spec: _IncludeSpec, n: int, dim: int):
    """The key query()'s statement is kept under (with the index layout): its filters spelled as JSON,
    what it returns and how many; None for a filter value JSON cannot spell exactly (built every time,
    never kept)."""
    try:
        filters = json.dumps([where, where_document], sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return (filters, spec.documents, spec.metadatas, spec.embeddings, n, dim)


def nearest_statement(
    part: Partition,
    cache: StatementCache,
    *,
    key,
    columns: sql.Composable,
    condition: sql.Composable,
    params: dict,
    n: int,
    dim: int,
    filtered: bool,
    gate_keys: Optional[dict],
) -> Kept:
    """query()'s statement and parameters (all but ``q``), kept under ``key`` (:func:`query_key`; None:
    not kept) and the vector index layout. ``gate_keys``: the filter's wing/room equalities, which choose
    the index (None: no such gate)."""
    layout = part.layout()

    def build():
        query, query_params = nearest_sql(
            part,
            columns=columns,
            condition=condition,
            params=params,
            n=n,
            dim=dim,
            filtered=filtered,
            gate=wing_room_gate(part, gate_keys),
            layout=layout,
        )
        return Kept(query, query_params, indexing.search_breadth(layout, part.db.settings.ef_search))

    return cache.get(None if key is None else (key, layout), build)


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
    (:func:`wing_room_gate`), which lets a common word's sample be filtered row by row when the
    filter matches a large share (LEXICAL_HEAP_FILTER).

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


def remember_common_words(conn: psycopg.Connection, schema: str, pk: int, *, min_growth: float = 0.0) -> None:
    """Count exactly the words found in at least LEXICAL_DF_CAP of a collection's documents, for lexical
    search's document frequencies (lexical_common_words, sql/0012): one scan of the collection's words.
    ``min_growth`` > 0: only when the collection has grown by that share since the last count. ``conn``
    commits it (autocommit, or the caller's transaction)."""
    conn.execute(
        sql.SQL("SELECT {}(%s, %s, %s)").format(sql.Identifier(schema, "remember_common_words")),
        (pk, LEXICAL_DF_CAP, min_growth),
    )


__all__ = [
    "BM25_B",
    "BM25_K1",
    "EXACT_SCAN_MAX",
    "FILTERED_OVERSAMPLE",
    "LEXICAL_CANDIDATES",
    "LEXICAL_DF_CAP",
    "LEXICAL_HEAP_FILTER",
    "LEXICAL_KNOWN_COMMON",
    "LEXICAL_RECOUNT_GROWTH",
    "remember_common_words",
    "lexical_sql",
    "nearest_sql",
    "Gate",
    "wing_room_gate",
    "nearest_statement",
    "query_key",
]
