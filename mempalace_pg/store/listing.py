"""One page of a palace's logical drawers, in id order, without reading the others.

MemPalace's ``mempalace_list_drawers`` fetches the metadata of every drawer in scope, folds the chunks
of a logical drawer (rows carrying ``parent_drawer_id`` or ``parent_entry_id``) into one entry, sorts
the entries by id and slices one page: a whole wing, or the whole palace, read for 20 drawers. Here
the page is chosen in SQL: the ids in scope come in order from the narrow, trigger-kept
``listing_keys`` (revision 0017), whose indexes answer by themselves (an index-only scan, so a deep
page skips index entries, not drawers), the chunk rows (few) from ``records_chunks``, and the number
of logical drawers from the trigger-kept ``facet_counts`` minus what the chunk rows change in it
(revision 0009). MemPalace then builds the page's entries from its rows with its own code
(:mod:`mempalace_pg.hooks`).

Order: ids by their UTF-8 bytes (``text_key``), which is the order Python's ``sorted`` gives for ids up
to 1,024 bytes (every id MemPalace makes).
"""

from __future__ import annotations

from textwrap import dedent
from typing import Optional

from psycopg import sql

from mempalace_pg.engine.nearest import facet_key_filter
from mempalace_pg.store.partition import Partition

#: listing_keys holds the first HEAD characters of a wing and a room (a B-tree entry is bounded)
HEAD = 256


def _scope(wing: Optional[str], room: Optional[str], alias: str) -> tuple[sql.Composable, dict]:
    """The condition on records ``alias`` of a wing/room equality, as MemPalace's
    ``where={"wing": ..., "room": ...}`` matches (string metadata equal to the value), and its parameters."""
    parts = [sql.SQL("{} = %(pk)s").format(sql.Identifier(alias, "collection_pk"))]
    params: dict = {}
    for field, value in (("wing", wing), ("room", room)):
        if value is not None:
            # left(...) meets records_wing_room / records_room; the equality decides
            parts.append(
                sql.SQL("left({f}, 256) = left(%({p})s, 256) AND {f} = %({p})s").format(
                    f=sql.Identifier(alias, field), p=sql.SQL(field)
                )
            )
            params[field] = value
    return sql.SQL(" AND ").join(parts), params


def _key_scope(db, table: sql.Composable, wing: Optional[str], room: Optional[str]) -> sql.Composable:
    """The same condition on listing_keys ``s``: equal heads decide for a value shorter than HEAD
    characters (a longer stored value has a head of HEAD characters); a longer value is compared whole
    in its record, which the page then reads for each entry it skips."""
    parts = [sql.SQL("s.collection_pk = %(pk)s")]
    whole = []
    for field, value in (("wing", wing), ("room", room)):
        if value is not None:
            parts.append(
                sql.SQL("s.{h} = left(%({p})s, 256)").format(
                    h=sql.Identifier(f"{field}_head"), p=sql.SQL(field)
                )
            )
            if len(value) >= HEAD:
                whole.append(sql.SQL("r.{f} = %({p})s").format(f=sql.Identifier(field), p=sql.SQL(field)))
    if whole:
        parts.append(
            sql.SQL(
                "EXISTS (SELECT 1 FROM {t} AS r "
                "WHERE r.collection_pk = %(pk)s AND {key}(r.id) = s.id_key AND {w})"
            ).format(t=table, key=db.ident("text_key"), w=sql.SQL(" AND ").join(whole))
        )
    return sql.SQL(" AND ").join(parts)


def page_statement(
    part: Partition, *, wing: Optional[str] = None, room: Optional[str] = None, limit: int, offset: int
) -> tuple[sql.Composed, dict]:
    """The statement of :func:`logical_page` and its parameters (run it with ``enable_seqscan`` off,
    as logical_page does)."""
    db = part.db
    s = _key_scope(db, part.table, wing, room)  # every row in scope, in id order
    c, params = _scope(wing, room, "c")  # chunk rows
    r, _ = _scope(wing, room, "r")  # the page's rows
    # the same scope over facet_counts, whose wing and room are JSON values
    key_filter, count_params = facet_key_filter(
        {k: v for k, v in (("wing", wing), ("room", room)) if v is not None}
    )
    names = {
        "t": part.table,
        "keys": db.ident("listing_keys"),
        "counts": db.ident("facet_counts"),
        "key": db.ident("text_key"),
        "lp": db.ident("logical_parent"),
        "s": s,
        "c": c,
        "r": r,
        "key_filter": key_filter,
    }
    query = sql.SQL(
        dedent(
            """
            WITH all_chunks AS MATERIALIZED (
                -- every chunk row of the collection (records_chunks: few), before the scope: a wing or
                -- room condition here would take the planner to that index and every row in scope
                SELECT collection_pk, wing, room, {key}(id) AS own, {key}({lp}(metadata)) AS k FROM {t}
                WHERE collection_pk = %(pk)s AND {lp}(metadata) IS NOT NULL),
            chunks AS MATERIALIZED (
                SELECT c.own, c.k FROM all_chunks AS c WHERE {c}),
            rows_in_order AS (
                SELECT s.id_key AS k FROM {keys} AS s
                WHERE {s}
                ORDER BY s.id_key
                -- up to the page's end, and as many more as the scope has chunk rows (records_chunks:
                -- few), which are set aside below; a condition on the metadata here would hide this
                -- scan's order from the planner (it has no statistics of logical_parent() and takes
                -- such a filter to keep a fraction of a percent of the rows)
                LIMIT %(upto)s + (SELECT count(*) FROM chunks)),
            page AS (
                SELECT k FROM (SELECT k FROM rows_in_order WHERE k NOT IN (SELECT own FROM chunks)
                               UNION
                               SELECT k FROM chunks) AS u
                ORDER BY k
                LIMIT %(limit)s OFFSET %(offset)s)
            SELECT
                -- the rows of the page: each drawer's own row, and the chunks of each logical drawer,
                -- looked up for each of the page's keys (not the scope's rows joined to the page)
                ARRAY(SELECT DISTINCT r.id FROM page CROSS JOIN LATERAL (
                          SELECT r.id FROM {t} AS r WHERE {key}(r.id) = page.k AND {r}
                          UNION ALL
                          SELECT r.id FROM {t} AS r
                          WHERE {key}({lp}(r.metadata)) = page.k AND {lp}(r.metadata) IS NOT NULL
                            AND {r}) AS r),
                -- chunk rows are not drawers of their own; their logical drawers are, once each, and
                -- stand in for a row of their own id (a legacy logical row, which MemPalace shows once)
                COALESCE((SELECT sum(n) FROM {counts} WHERE collection_pk = %(pk)s {key_filter}), 0)
                - (SELECT count(*) FROM chunks)
                + (SELECT count(DISTINCT k) FROM chunks)
                - (SELECT count(*) FROM (SELECT DISTINCT k FROM chunks) AS d
                   WHERE EXISTS (SELECT 1 FROM {t} AS r
                                 WHERE {key}(r.id) = d.k AND {r} AND {lp}(r.metadata) IS NULL))
            """
        )
    ).format(**names)
    params = {
        **params,
        **count_params,
        "pk": part.pk,
        "limit": limit,
        "offset": offset,
        "upto": offset + limit,
    }
    return query, params


def logical_page(
    part: Partition, *, wing: Optional[str] = None, room: Optional[str] = None, limit: int, offset: int
) -> tuple[list[str], int]:
    """``(ids, total)``: the ids of the rows that make up logical drawers ``offset .. offset + limit``
    (in id order) of the wing and room given, and how many logical drawers there are. One statement,
    so one snapshot."""
    query, params = page_statement(part, wing=wing, room=room, limit=limit, offset=offset)

    def run(conn):
        # every part of the statement has an index that answers it; the planner, misjudging the chunk
        # rows, would otherwise scan the partition for them
        conn.execute("SET LOCAL enable_seqscan = off")
        return conn.execute(query, params).fetchone()

    ids, total = part.db.run(run, atomic=True)
    return list(ids), int(total)


__all__ = ["logical_page", "page_statement"]
