"""The nearest-vector statement over a collection's vector index: one arm per segment, one over the tail.

One SQL statement, usable on its own (``PostgresCollection.query``) or as a subquery of a larger one
(:mod:`mempalace_pg.retrieval` joins it with the graph). It takes the collection's
:class:`~mempalace_pg.engine.indexing.SegmentIndex`: the layout it is written for, its table and width.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Optional

from psycopg import sql

from mempalace_pg.db.sqlkit import MAX_ROW_COUNT, Kept, StatementCache, row_count
from mempalace_pg.engine import indexing
from mempalace_pg.engine.indexing import SegmentIndex

#: A filtered query takes this many times n_results candidates from the index before re-ranking: the
#: iterative scan returns batches out of order, and a few more candidates put the best ones back in
#: (see "Backends at 100,000 drawers" in benchmarks/RESULTS.md for the recall this gives).
FILTERED_OVERSAMPLE = 2
#: A query whose filter matches at most this many records is answered by an exact scan (a filter of
#: other kinds than wing/room equalities, or vectors too wide for the sign bits' first pass).
EXACT_SCAN_MAX = 3000
#: A query filtered by wing (and room) that matches at most this many records for each index segment
#: is answered from the filter's own rows: ranked by the Hamming distance of their sign bits
#: (vector_bits, sql/0016, read by an index-only scan of its wing/room index, sql/0019), the best
#: re-ranked by the exact distance, as the tail is. That costs a fraction of an exact scan per matching
#: row, whatever the layout, where each segment's walk visits rows until its share of matches turns up,
#: the more the smaller the filter's share; so the more segments a palace has (right after a large
#: write, under sustained writes) the larger the filters this takes. The bound is where the two cost
#: about the same a segment right after a big write ("A filtered search right after a big write, each
#: way" in benchmarks/RESULTS.md, by the filter's size); below it the own rows' slowest query is also
#: far below the walks'.
OWN_ROWS_PER_SEGMENT = 12_000
#: A query unfiltered or filtered by wing and room ranks the tail (rows no index segment holds yet) by
#: the Hamming distance of their binary-quantized vectors (vector_bits, sql/0016) first, and re-ranks by
#: the exact distance the TAIL_OVERSAMPLE x n_results (at least TAIL_CANDIDATES) that rank best:
#: reading the narrow table costs a fraction of reading every tail row, and the re-rank puts back the
#: order the sign bits blur (bench_scale in benchmarks/RESULTS.md). Other filters scan the rows they
#: leave exactly.
TAIL_OVERSAMPLE = 40
TAIL_CANDIDATES = 400
#: vector_bits keeps the first this many characters of a row's wing and room (sql/0019).
BITS_KEY_CHARS = 256


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
    #: the first passes apply them to vector_bits' copies of the columns, and a filter with few matches
    #: for the layout's segments is answered from its own rows there (OWN_ROWS_PER_SEGMENT)
    keys: Optional[dict] = None


def wing_room_gate(index: SegmentIndex, keys: Optional[dict]) -> Optional[Gate]:
    """The gate of a wing/room filter ``keys`` (see :func:`mempalace_pg.store.filters.wing_room_equalities`),
    counted from the trigger-kept facet_counts; None for no such filter."""
    if not keys:
        return None
    key_filter, key_params = facet_key_filter(keys)
    # texteq(a, b) is a = b as a function call: no index serves it, and PostgreSQL gives it the default
    # selectivity of a boolean function (a third) instead of its estimate of the values' share.
    walk = [sql.SQL("collection_pk = {}").format(sql.Literal(index.pk))]
    walk += [
        sql.SQL("pg_catalog.texteq({}, {}::text)").format(sql.Identifier(k), sql.Placeholder(f"walk_{k}"))
        for k in keys
    ]
    return Gate(
        sql.SQL("SELECT COALESCE(sum(n), 0) AS n FROM {} WHERE collection_pk = %(pk)s {}").format(
            index.db.ident("facet_counts"), key_filter
        ),
        {"pk": index.pk, **key_params, **{f"walk_{k}": v for k, v in keys.items()}},
        sql.SQL(" AND ").join(walk),
        dict(keys),
    )


def facet_key_filter(keys: dict) -> tuple[sql.Composable, dict]:
    """``AND wing = ... AND room = ...`` over facet_counts for wing/room string equalities (their
    parameters named ``key_wing``, ``key_room``)."""
    parts = [
        sql.SQL("AND {} = {}::jsonb").format(sql.Identifier(k), sql.Placeholder(f"key_{k}")) for k in keys
    ]
    return sql.SQL(" ").join(parts), {f"key_{k}": json.dumps(v) for k, v in keys.items()}


# Long because its SQL is written out clause by clause; its arms are built in one loop.
def nearest_sql(
    index: SegmentIndex,
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

    One arm per vector index segment of ``layout`` (default: the collection's current one; a caller that
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
    layout = layout or index.layout(start_folder=True)
    fmt = dict(
        cols=columns,
        vt=indexing.vector_type(dim),
        ht=indexing.half_type(dim),
        t=index.table,
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
        # vector_bits keeps a wing's or room's first BITS_KEY_CHARS characters: a shorter value is
        # found there exactly, a longer one only by its start; its one index leads with the wing
        # (sql/0019)
        own = (
            gate.keys
            and "wing" in gate.keys
            and dim <= indexing.HNSW_MAX_DIM
            and all(len(v) < BITS_KEY_CHARS for v in gate.keys.values())
        )
        # the most matches answered without the walks: by their sign bits first, or by an exact scan
        most = OWN_ROWS_PER_SEGMENT * max(1, len(layout.segments)) if own else EXACT_SCAN_MAX
        gate_ann = sql.SQL(" AND (SELECT n FROM matching) > {}").format(sql.Literal(most))
        if gate.walk_condition is not None:
            walk["cond"] = gate.walk_condition
        parts.append(sql.SQL("matching AS MATERIALIZED ({})").format(gate.count))
        first = sql.SQL("")
        if own:
            first = sql.SQL("vector_seq = ANY ({}) AND ").format(
                bits_first_pass(index, gate.keys, sql.SQL("true"), dim, n, by_keys=True)
            )
        parts.append(
            sql.SQL(
                "exact AS MATERIALIZED ("
                " SELECT {cols}, (embedding::{vt} <=> %(q)s::{vt}) AS distance FROM {t}"
                " WHERE {first}{cond} AND (SELECT n FROM matching) <= {max} ORDER BY distance, id LIMIT {n})"
            ).format(first=first, max=sql.Literal(most), **fmt)
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
        first = bits_first_pass(index, keys, tail, dim, n, by_keys=False)
        tail = sql.SQL("vector_seq = ANY ({}) AND {}").format(first, tail)
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


def bits_first_pass(
    index: SegmentIndex, keys: dict, rows: sql.Composable, dim: int, n: int, *, by_keys: bool
) -> sql.Composable:
    """The vector_seq of the TAIL_OVERSAMPLE x ``n`` (at least TAIL_CANDIDATES) rows nearest the query
    by the Hamming distance of their sign bits (vector_bits), among those meeting ``rows`` (a condition
    on vector_seq) and the equalities ``keys`` (wing and/or room), as an array. The caller re-ranks them
    exactly, against the whole filter: vector_bits keeps the first BITS_KEY_CHARS characters of each
    value, so a longer value's pass may pick rows of another value with the same start. ``by_keys``:
    the equalities in the form the table's wing/room index serves (an index-only scan of a filter's
    rows); else in a form no index serves, so that a pass over the tail (``rows``: above the newest
    segment) reads it by vector_seq and never a whole wing's entries."""
    form = " AND {k} = left({v}, {c})" if by_keys else " AND pg_catalog.texteq({k}, left({v}, {c}))"
    equal = sql.SQL("").join(
        sql.SQL(form).format(
            k=sql.Identifier(k), v=sql.Placeholder(f"walk_{k}"), c=sql.Literal(BITS_KEY_CHARS)
        )
        for k in keys
    )
    return sql.SQL(
        "ARRAY(SELECT vector_seq FROM {bits} WHERE collection_pk = {pk} AND {rows}{eq}"
        " ORDER BY bits <~> (SELECT binary_quantize(%(q)s::{vt})::bit varying) LIMIT {k})"
    ).format(
        bits=index.db.ident("vector_bits"),
        pk=sql.Literal(index.pk),
        rows=rows,
        eq=equal,
        vt=indexing.vector_type(dim),
        k=row_count(min(MAX_ROW_COUNT, max(TAIL_CANDIDATES, TAIL_OVERSAMPLE * n))),
    )


def nearest_statement(
    index: SegmentIndex, cache: StatementCache, *, key, gate_keys: Optional[dict], **statement
) -> Kept:
    """:func:`nearest_sql`'s statement (``statement``: its keyword arguments but ``gate`` and ``layout``)
    and parameters (all but ``q``), kept in ``cache`` under ``key`` (None: not kept) and the vector index
    layout, with the search breadth for that layout. ``gate_keys``: the filter's wing/room equalities,
    which choose the index (None: no such gate). Reading the layout may start a folder."""
    layout = index.layout(start_folder=True)

    def build():
        query, query_params = nearest_sql(
            index, gate=wing_room_gate(index, gate_keys), layout=layout, **statement
        )
        return Kept(query, query_params, indexing.search_breadth(layout, index.db.settings.ef_search))

    return cache.get(None if key is None else (key, layout), build)


__all__ = [
    "EXACT_SCAN_MAX",
    "FILTERED_OVERSAMPLE",
    "TAIL_OVERSAMPLE",
    "TAIL_CANDIDATES",
    "BITS_KEY_CHARS",
    "Gate",
    "facet_key_filter",
    "OWN_ROWS_PER_SEGMENT",
    "wing_room_gate",
    "bits_first_pass",
    "nearest_sql",
    "nearest_statement",
]
