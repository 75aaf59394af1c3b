"""What MemPalace reads from a palace's tables itself, for a postgres palace: counts per wing, room
and hall, and the transcript sources per wing (see :mod:`mempalace_pg.hooks`, which hands them to
MemPalace's palace graph, tunnels, audit and taxonomy). Each is one statement over a
:class:`~mempalace_pg.store.partition.Partition`, most of them over the trigger-kept facet_counts.
"""

from __future__ import annotations

from psycopg import sql

from mempalace_pg.store.partition import Partition


def wing_room_counts(part: Partition) -> tuple[int, dict]:
    """``(total, {wing: {room: n}})`` from the trigger-kept counts, as MemPalace's Chroma reader
    (``_sqlite_wing_room_counts``) returns it: strings as they are, numbers as text, anything else
    (missing, bool, list, null) ``"?"``; wings and rooms in byte order."""
    db = part.db
    query = sql.SQL(
        "SELECT w, r, n FROM (SELECT"
        " COALESCE(CASE WHEN jsonb_typeof(wing) IN ('string', 'number') THEN wing #>> '{{}}' END, '?') AS w,"
        " COALESCE(CASE WHEN jsonb_typeof(room) IN ('string', 'number') THEN room #>> '{{}}' END, '?') AS r,"
        " sum(n) AS n FROM {} WHERE collection_pk = %(pk)s GROUP BY 1, 2 HAVING sum(n) > 0) AS c"
        ' ORDER BY w COLLATE "C", r COLLATE "C"'
    ).format(db.ident("facet_counts"))
    rows = db.run(lambda conn: conn.execute(query, {"pk": part.pk}).fetchall())
    counts: dict = {}
    for wing, room, n in rows:
        rooms = counts.setdefault(wing, {})
        rooms[room] = rooms.get(room, 0) + int(n)
    return sum(int(r[2]) for r in rows), counts


def grouped_counts(part: Partition) -> list[tuple]:
    """``(room, wing, hall, n, last_date)`` per room, wing and hall: what MemPalace's palace graph,
    tunnels, hallways and audit read from Chroma's or sqlite_exact's tables. Values as Chroma
    spells them ('' when missing or not a string or number); ``last_date`` the greatest string
    ``date`` of the group, bytewise, or ''. From the trigger-kept room_counts (revision 0009): one
    row per group, whatever the palace's size."""
    db = part.db
    spelled = "COALESCE(CASE WHEN jsonb_typeof({k}) IN ('string', 'number') THEN {k} #>> '{{{{}}}}' END, '')"
    query = sql.SQL(
        "SELECT "
        + spelled.format(k="room")
        + ", "
        + spelled.format(k="wing")
        + ", "
        + spelled.format(k="hall")
        + ", sum(n), COALESCE(max(last_date), '') FROM {} WHERE collection_pk = %(pk)s"
        " GROUP BY 1, 2, 3 HAVING sum(n) > 0"
    ).format(db.ident("room_counts"))
    return [
        (room, wing, hall, int(n), last)
        for room, wing, hall, n, last in db.run(lambda conn: conn.execute(query, {"pk": part.pk}).fetchall())
    ]


def wing_source_counts(part: Partition) -> list[tuple]:
    """``(wing, source_file, n)`` for drawers mined from Claude Code or Codex transcripts (a
    ``source_file`` under ``.claude/projects`` or ``.codex/sessions``, matched as SQLite's LIKE
    matches, ASCII case folded): what ``mempalace audit`` and ``wings split`` read from Chroma's
    tables. ``wing`` is '' when missing or not a string."""
    db = part.db
    query = sql.SQL(
        "SELECT COALESCE(wing, CASE WHEN jsonb_typeof(metadata -> 'wing') = 'string' THEN metadata ->> "
        "'wing' END, ''),"
        " source_file, count(*) FROM {} WHERE source_file IS NOT NULL"
        " AND (source_file ILIKE '%%.claude%%projects%%' OR source_file ILIKE '%%.codex%%sessions%%')"
        " GROUP BY 1, 2"
    ).format(part.table)
    return [tuple(r) for r in db.run(lambda conn: conn.execute(query).fetchall())]


__all__ = ["grouped_counts", "wing_room_counts", "wing_source_counts"]
