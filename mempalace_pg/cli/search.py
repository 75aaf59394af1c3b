"""``mempalace-pg search``: the knowledge graph joined with the drawers, one statement each."""

from __future__ import annotations

from typing import Iterator, Optional

from mempalace_pg.cli.common import open_search, palace_args, report


def query_vector(text: str) -> list[float]:
    """The query embedded by MemPalace's configured embedder (a failure says what to fix). Imported on use:
    the retrieval package imports MemPalace's backends, which every other command can do without."""
    from mempalace_pg.retrieval.embedding import query_vector as embedded

    return embedded(text)


def _snippet(text: Optional[str], width: int = 100) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _fact_line(f: dict) -> str:
    span = f"[{f.get('valid_from') or '…'} → {f.get('valid_to') or 'now'}]"
    return f"{f['subject']} —{f['predicate']}→ {f['object']}  {span}"


def _scope(args) -> dict:
    """The options every search over drawers takes from its command line: how many, where, as of when."""
    return {"n_results": args.n, "wing": args.wing, "room": args.room, "as_of": args.as_of}


def cmd_search_around(args) -> int:
    from mempalace_pg.retrieval.around import query_without_entity

    with open_search(args) as search:
        ranked_by = args.query if args.keep_entity_in_query else query_without_entity(args.query, args.entity)
        result = search.around_entity(
            args.entity,
            query_vector(ranked_by),
            hops=args.hops,
            mode=args.mode,
            boost=args.boost,
            **_scope(args),
        )
    return report(args, result, lambda: _around_lines(args, result))


def _around_lines(args, result: dict) -> Iterator[str]:
    if not result["entity_found"]:
        yield f"no entity {args.entity!r} in this palace's knowledge graph: nothing to search around"
        return
    yield (
        f"{args.entity}: {result['entities'] - 1} entities within {args.hops} hop(s), {result['facts']} "
        "facts, "
        f"{result['evidence_drawers']} source drawers" + (f" (as of {args.as_of})" if args.as_of else "")
    )
    if not result["hits"]:
        yield "no drawers found"
    for i, hit in enumerate(result["hits"], 1):
        mark = "*" if hit["evidence"] else " "
        meta = hit.get("metadata") or {}
        yield (
            f"{i:2d}.{mark} {hit['id']}  similarity {hit['similarity']:.3f}  "
            f"[{meta.get('wing', '-')}/{meta.get('room', '-')}]  {_snippet(hit['document'])}"
        )
        for fact in hit["facts"]:
            yield f"       {_fact_line(fact)}"
    if args.mode == "boost":
        yield "(* = source of a fact in the neighbourhood, boosted)"


def cmd_search_facts(args) -> int:
    with open_search(args) as search:
        vector = query_vector(args.query) if args.query else None
        result = search.facts_with_evidence(
            args.entity, vector, as_of=args.as_of, direction=args.direction, limit=args.n
        )
    return report(args, result, lambda: _facts_lines(args, result))


def _facts_lines(args, result: dict) -> Iterator[str]:
    if not result["entity_found"]:
        yield f"no entity {args.entity!r} in this palace's knowledge graph"
        return
    if not result["facts"]:
        yield f"nothing known about {args.entity!r}" + (f" as of {args.as_of}" if args.as_of else "")
    for fact in result["facts"]:
        sim = f"similarity {fact['similarity']:.3f}" if fact.get("similarity") is not None else ""
        yield f"{_fact_line(fact)}  {sim}"
        if fact["source_drawer_id"]:
            yield (
                f"    from drawer {fact['source_drawer_id']} ({fact['evidence']}): "
                f"{_snippet(fact.get('document'))}"
            )


def cmd_search_entities(args) -> int:
    with open_search(args) as search:
        rows = search.entities_for_query(
            query_vector(args.query),
            drawers=args.drawers,
            query_text=args.query,
            **_scope(args),
        )
    return report(args, rows, lambda: _entities_lines(rows))


def _entities_lines(rows: list) -> Iterator[str]:
    if not rows:
        yield "no entities are linked to the drawers nearest to this query"
    for i, row in enumerate(rows, 1):
        best = "named in the query" if row["score"] is None else f"best similarity {row['score']:.3f}"
        yield (
            f"{i:2d}. {row['name'] or row['entity_id']} ({row['type']})  {best}  "
            f"{row['drawers']} drawer(s), {row['facts']} fact(s); best: {row['best_drawer']}"
        )


def cmd_search_hybrid(args) -> int:
    with open_search(args) as search:
        rows = search.hybrid(
            args.query,
            query_vector(args.query),
            stale=args.stale,
            **_scope(args),
            **({} if args.text_weight is None else {"text_weight": args.text_weight}),
        )
    return report(args, rows, lambda: _hybrid_lines(rows))


def _hybrid_lines(rows: list) -> Iterator[str]:
    if not rows:
        yield "no drawers found"
    for i, row in enumerate(rows, 1):
        ranks = f"vector #{row['vector_rank'] or '-'}, text #{row['text_rank'] or '-'}"
        meta = row.get("metadata") or {}
        yield (
            f"{i:2d}. {row['id']}  rrf {row['score']:.4f} ({ranks})  [{meta.get('wing', '-')}/"
            f"{meta.get('room', '-')}]{_staleness(row)}  {_snippet(row['document'])}"
        )


def _staleness(row: dict) -> str:
    """`` STALE (replaced by ...)`` for a drawer whose facts no longer hold, else nothing."""
    if not row.get("stale"):
        return ""
    newer = row["standing"]["replaced_by"]
    return " STALE" + (f" (replaced by {', '.join(newer)})" if newer else " (its facts ended)")


def register(sub) -> None:
    """Add this group's commands to the ``mempalace-pg`` parser's subcommands ``sub``."""
    search = sub.add_parser(
        "search", help="the knowledge graph joined with the drawers, one SQL statement each"
    ).add_subparsers(dest="search_command", required=True)

    def filters(p, *, n=10):
        p.add_argument("-n", type=int, default=n, help=f"how many results (default {n})")
        p.add_argument("--wing", help="only drawers of this wing")
        p.add_argument("--room", help="only drawers of this room")

    around = search.add_parser(
        "around", help="drawers similar to a query among what is known around an entity"
    )
    around.add_argument("entity")
    around.add_argument("query", help="text to embed with MemPalace's configured embedder")
    around.add_argument("--hops", type=int, default=1, help="neighbourhood radius in facts (1-6, default 1)")
    around.add_argument("--as-of", help="only facts valid at this date")
    around.add_argument(
        "--mode",
        choices=("restrict", "boost", "fuse"),
        default="restrict",
        help="restrict: only the neighbourhood's source drawers; boost: all drawers, those ranked up; "
        "fuse: all drawers, ranked by rank fusion with the sources",
    )
    around.add_argument(
        "--boost", type=float, default=0.1, help="similarity bonus in boost mode (default 0.1)"
    )
    around.add_argument(
        "--keep-entity-in-query",
        action="store_true",
        help="rank by the query as written (by default the entity's name is taken out of it first)",
    )
    filters(around)
    palace_args(around)
    around.set_defaults(func=cmd_search_around)
    facts = search.add_parser("facts", help="facts about an entity with the drawers they came from")
    facts.add_argument("entity")
    facts.add_argument("--query", help="rank the facts by how similar their drawer is to this text")
    facts.add_argument("--as-of", help="only facts valid at this date")
    facts.add_argument("--direction", choices=("outgoing", "incoming", "both"), default="both")
    facts.add_argument("-n", type=int, default=100, help="at most this many facts (default 100)")
    palace_args(facts)
    facts.set_defaults(func=cmd_search_facts)
    ents = search.add_parser("entities", help="entities ranked by the similarity of their drawers to a query")
    ents.add_argument("query")
    ents.add_argument("--drawers", type=int, default=50, help="nearest drawers to take (default 50)")
    ents.add_argument("--as-of", help="only facts valid at this date")
    filters(ents)
    palace_args(ents)
    ents.set_defaults(func=cmd_search_entities)
    hyb = search.add_parser("hybrid", help="vector and full-text rankings fused (reciprocal rank fusion)")
    hyb.add_argument("query")
    hyb.add_argument("--as-of", help="judge whether a drawer still holds by the facts valid at this date")
    hyb.add_argument(
        "--text-weight",
        type=float,
        help="weight of the full-text ranking against the vector one, 0-1 (default 0.5)",
    )
    hyb.add_argument(
        "--stale",
        choices=("mark", "demote"),
        default="mark",
        help="mark: flag drawers whose facts have all ended or been replaced; demote: also rank them last",
    )
    filters(hyb)
    palace_args(hyb)
    hyb.set_defaults(func=cmd_search_hybrid)


__all__ = ["register", "cmd_search_around", "cmd_search_facts", "cmd_search_entities", "cmd_search_hybrid"]
