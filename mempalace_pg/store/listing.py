"""One page of a palace's logical drawers, in id order, without reading the others.

MemPalace's ``mempalace_list_drawers`` fetches the metadata of every drawer in scope, folds the chunks
of a logical drawer (rows carrying ``parent_drawer_id`` or ``parent_entry_id``) into one entry, sorts
the entries by id and slices one page: a whole wing, or the whole palace, read for 20 drawers. Here
the page is chosen in SQL: the drawers of their own come in id order from an index
(``records_listing_wing``, ``records_wing_room``, ``records_key``), the chunk rows (few) from
``records_chunks``, and the number of logical drawers from the trigger-kept ``facet_counts`` minus
what the chunk rows change in it (revision 0009). MemPalace then builds the page's entries from its
rows with its own code (:mod:`mempalace_pg.hooks`).

Order: ids by their UTF-8 bytes (``text_key``), which is the order Python's ``sorted`` gives for ids up
to 1,024 bytes (every id MemPalace makes).
"""

from __future__ import annotations

from textwrap import dedent
from typing import Optional

from psycopg import sql

from mempalace_pg.engine.nearest import facet_key_filter
from mempalace_pg.store.partition import Partition


def _scope(wing: Optional[str], room: Optional[str], alias: str) -> tuple[sql.Composable, dict]:
    """The condition on records ``alias`` of a wing/room equality, as MemPalace's
    ``where={"wing": ..., "room": ...}`` matches (string metadata equal to the value), and its parameters."""
    parts = [sql.SQL("{} = %(pk)s").format(sql.Identifier(alias, "collection_pk"))]
    params: dict = {}
    for field, value in (("wing", wing), ("room", room)):
        if value is not None:
            # left(...) meets records_listing_wing / records_wing_room; the equality decides
            parts.append(
                sql.SQL("left({f}, 256) = left(%({p})s, 256) AND {f} = %({p})s").format(
                    f=sql.Identifier(alias, field), p=sql.SQL(field)
                )
            )
            params[field] = value
    return sql.SQL(" AND ").join(parts), params


def logical_page(
    part: Partition, *, wing: Optional[str] = None, room: Optional[str] = None, limit: int, offset: int
) -> tuple[list[str], int]:
    """``(ids, total)``: the ids of the rows that make up logical drawers ``offset .. offset + limit``
    (in id order) of the wing and room given, and how many logical drawers there are. One statement,
    so one snapshot."""
    db = part.db
    s, params = _scope(wing, room, "s")  # every row in scope, in id order
    c, _ = _scope(wing, room, "c")  # chunk rows
    r, _ = _scope(wing, room, "r")  # the page's rows
    # the same scope over facet_counts, whose wing and room are JSON values
    key_filter, count_params = facet_key_filter(
        {k: v for k, v in (("wing", wing), ("room", room)) if v is not None}
    )
    names = {
        "t": part.table,
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
                SELECT id, collection_pk, wing, room, {key}({lp}(metadata)) AS k FROM {t}
                WHERE collection_pk = %(pk)s AND {lp}(metadata) IS NOT NULL),
            chunks AS MATERIALIZED (
                SELECT c.id, c.k FROM all_chunks AS c WHERE {c}),
            rows_in_order AS (
                SELECT s.id, {key}(s.id) AS k FROM {t} AS s
                WHERE {s}
                ORDER BY {key}(s.id)
                -- up to the page's end, and as many more as the scope has chunk rows (records_chunks:
                -- few), which are set aside below; a condition on the metadata here would hide this
                -- scan's order from the planner (it has no statistics of logical_parent() and takes
                -- such a filter to keep a fraction of a percent of the rows)
                LIMIT %(upto)s + (SELECT count(*) FROM chunks)),
            page AS (
                SELECT k FROM (SELECT k FROM rows_in_order WHERE id NOT IN (SELECT id FROM chunks)
                               UNION
                               SELECT k FROM chunks) AS u
                ORDER BY k
                LIMIT %(limit)s OFFSET %(offset)s)
            SELECT
                -- the rows of the page: each drawer's own row, and the chunks of each logical drawer
                ARRAY(SELECT r.id FROM {t} AS r JOIN page ON {key}(r.id) = page.k
                      WHERE {r}
                      UNION
                      SELECT r.id FROM {t} AS r JOIN page ON {key}({lp}(r.metadata)) = page.k
                      WHERE {r} AND {lp}(r.metadata) IS NOT NULL),
                -- chunk rows are not drawers of their own; their logical drawers are, once each, and
                -- stand in for a row of their own id (a legacy logical row, which MemPalace shows once)
                COALESCE((SELECT sum(n) FROM {counts} WHERE collection_pk = %(pk)s {key_filter}), 0)
                - (SELECT count(*) FROM chunks)
                + (SELECT count(DISTINCT k) FROM chunks)
                - (SELECT count(*) FROM {t} AS s
                   WHERE {s} AND {lp}(s.metadata) IS NULL AND {key}(s.id) IN (SELECT k FROM chunks))
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

    def run(conn):
        # every part of the statement has an index that answers it; the planner, misjudging the chunk
        # rows, would otherwise scan the partition for them
        conn.execute("SET LOCAL enable_seqscan = off")
        return conn.execute(query, params).fetchone()

    ids, total = db.run(run, atomic=True)
    return list(ids), int(total)


__all__ = ["logical_page"]
