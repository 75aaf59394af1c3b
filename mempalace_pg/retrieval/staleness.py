"""Whether what a drawer says still holds: the standing of the facts drawn from it (MemPalace #224).

A drawer is the evidence of the facts whose ``source_drawer_id`` names it. The knowledge graph knows
when each stopped holding: a fact **ended** when its ``valid_to`` has passed (MemPalace's
``invalidate``), and it was **superseded** when a newer fact has the same subject and predicate and
another object (``Alice works_at Acme`` from 2025, then ``Alice works_at Initech`` from 2026) and holds
at the date asked about. A drawer all of whose facts ended or were superseded is **stale**: what it
says was true once. A drawer no fact names is neither: the graph says nothing about it.

The date is ``as_of`` (what the palace believed then: facts not yet valid on it do not count, facts
ended after it still hold) or, without one, now. One statement for all the drawers of an answer, over
the Fact label table's ``source_drawer_id`` and ``(start_id, predicate)`` indexes.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional, Sequence

from psycopg import sql

from mempalace_pg.db.sqlkit import Kept
from mempalace_pg.retrieval.base import SearchBase, loaded_json

#: What a search does with stale drawers: mark them (the default), or also rank them after every
#: drawer that is not stale (their own order kept).
STALE_MODES = ("mark", "demote")


def checked_stale_mode(stale: str) -> str:
    """``stale`` if it is one of STALE_MODES, else ValueError naming them."""
    if stale not in STALE_MODES:
        raise ValueError(f"stale must be one of {', '.join(STALE_MODES)}, not {stale!r}")
    return stale


class Staleness(SearchBase):
    def drawer_standing(self, drawer_ids: Sequence[str], *, as_of: Optional[str] = None) -> dict[str, dict]:
        """For each of ``drawer_ids`` that some fact names as its source: ``{"facts", "current",
        "ended", "superseded", "not_yet", "stale", "replaced_by"}`` at ``as_of`` (default: now).
        ``facts`` counts the facts drawn from the drawer, ``current`` those that hold, the others by
        cause (``not_yet``: valid only from a later date); ``stale`` is True when none holds and one
        ended or was superseded; ``replaced_by`` lists the drawers the superseding facts were drawn
        from. Drawers no fact names are left out."""
        ids = [str(i) for i in drawer_ids]
        if not ids:
            return {}
        at = self._as_of(as_of) or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

        def build():
            t, key, valid = self._fn("kg_text"), self._fn("kg_key"), self._fn("kg_valid_at")
            start = self._fn("kg_start_key")
            query = sql.SQL(
                "WITH f AS (SELECT {t}(x.properties, 'source_drawer_id') AS drawer, x.start_id, x.end_id,"
                "   x.properties AS p, {valid}(x.properties, %(at)s) AS holds,"
                "   coalesce({end}({t}(x.properties, 'valid_to')) COLLATE \"C\" <= %(at)s, false) AS ended"
                "  FROM {fact} x WHERE {t}(x.properties, 'palace') = %(palace)s::text"
                "  AND {key}(x.properties, 'source_drawer_id') = ANY (ARRAY(SELECT {text_key}(i)"
                "   FROM unnest(%(ids)s::text[]) AS i))"
                # the ids may be long: the index keys them as kg_key does; the text itself decides
                "  AND {t}(x.properties, 'source_drawer_id') = ANY (%(ids)s::text[])),"
                # a newer fact with the same subject and predicate and another object, holding at the date
                " s AS (SELECT f.drawer, f.holds, f.ended, n.drawers AS newer FROM f LEFT JOIN LATERAL ("
                "   SELECT array_agg(DISTINCT {t}(g.properties, 'source_drawer_id')) AS drawers,"
                "    count(*) AS n FROM {fact} g"
                "   WHERE g.start_id = f.start_id"
                "   AND {key}(g.properties, 'predicate') = {key}(f.p, 'predicate')"
                "   AND g.end_id <> f.end_id AND {valid}(g.properties, %(at)s)"
                "   AND {t}(g.properties, 'valid_from') IS NOT NULL"
                "   AND ({t}(f.p, 'valid_from') IS NULL"
                "    OR {start}({t}(g.properties, 'valid_from')) COLLATE \"C\""
                "    > {start}({t}(f.p, 'valid_from')) COLLATE \"C\")) AS n ON true)"
                " SELECT coalesce(jsonb_object_agg(drawer, jsonb_build_object("
                "  'facts', facts, 'current', current, 'ended', ended, 'superseded', superseded,"
                "  'not_yet', facts - current - ended - superseded,"
                "  'stale', current = 0 AND ended + superseded > 0,"
                "  'replaced_by', coalesce(replaced_by, '[]'::jsonb))), '{{}}')"
                " FROM (SELECT drawer, count(*) AS facts,"
                "   count(*) FILTER (WHERE holds AND newer IS NULL) AS current,"
                "   count(*) FILTER (WHERE NOT holds AND ended) AS ended,"
                "   count(*) FILTER (WHERE holds AND newer IS NOT NULL) AS superseded,"
                "   (SELECT jsonb_agg(DISTINCT r) FROM s AS s2, unnest(s2.newer) AS r"
                "    WHERE s2.drawer = s.drawer AND s2.holds AND r IS NOT NULL) AS replaced_by"
                "  FROM s GROUP BY drawer) AS standing"
            ).format(
                t=t,
                key=key,
                valid=valid,
                start=start,
                end=self._fn("kg_end_key"),
                text_key=self._fn("text_key"),
                fact=self._fact,
            )
            return Kept(query, {"palace": self.kg.palace_pk()})

        row = self._execute(self._cache.get(("standing",), build), ids=ids, at=at)
        return loaded_json(row[0])

    def mark_stale(self, rows: list[dict], *, as_of: Optional[str], stale: str, n: int) -> list[dict]:
        """Add each row's ``standing`` (:meth:`drawer_standing`, None when no fact names the drawer) and
        ``stale``; with ``stale="demote"``, rank stale rows after the others. The first ``n`` rows."""
        checked_stale_mode(stale)
        standing = self.drawer_standing([r["id"] for r in rows], as_of=as_of)
        for row in rows:
            row["standing"] = standing.get(row["id"])
            row["stale"] = bool(row["standing"] and row["standing"]["stale"])
        if stale == "demote":
            rows = [r for r in rows if not r["stale"]] + [r for r in rows if r["stale"]]
        return rows[:n]


__all__ = ["Staleness", "STALE_MODES", "checked_stale_mode"]
