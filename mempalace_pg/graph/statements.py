"""The SQL statements of the AGE knowledge graph (:class:`~mempalace_pg.graph.kg.AgeKnowledgeGraph`),
composed once per (schema, graph) with psycopg's ``sql`` and rendered to text, so a call neither
composes nor renders SQL. Identifiers are ``sql.Identifier``; every value a named placeholder.
"""

from __future__ import annotations

import functools

from psycopg import sql

from mempalace_pg.db.sqlkit import StatementCache, row_count
from mempalace_pg.graph.sql_parts import DIRECTIONS, SIDES, Parts, compose, render

#: The columns of MemPalace's SQLite ``entities`` and ``triples`` tables, in its order: what replication
#: (dump_rows/apply_row), the SQLite snapshot of :meth:`AgeKnowledgeGraph._conn` and kg import carry.
REPLICATION_COLUMNS = {
    "entities": ("id", "name", "type", "properties", "created_at"),
    "triples": (
        "id",
        "subject",
        "predicate",
        "object",
        "valid_from",
        "valid_to",
        "confidence",
        "source_closet",
        "source_file",
        "source_drawer_id",
        "adapter_name",
        "extracted_at",
    ),
}


class Statements:
    """The SQL of every method, built once per (schema, graph) and kept as text (see
    :func:`statements`). Every value is a bound named parameter, ``%(palace)s`` always among them
    (the palace statements excepted); the schema and graph are validated identifiers."""

    def __init__(self, schema: str, graph: str):
        parts = Parts(schema, graph)
        self._palaces(parts)
        self._writes(parts)
        self._lookups(parts)
        self._facts_of_entity(parts)
        self._timeline(parts)
        self._summaries(parts)
        self._replication(parts)
        self._pages = StatementCache()  # timeline pages, by (of_entity, limit, offset)

    def _palaces(self, p: Parts) -> None:
        palaces = p.fn("palaces")
        self.find_palace = render(
            compose(
                "SELECT palace_pk FROM {palaces} WHERE namespace = %(namespace)s AND palace_key = "
                "%(palace_key)s",
                palaces=palaces,
            )
        )
        self.make_palace = render(
            compose(
                """
            INSERT INTO {palaces} (namespace, palace_key) VALUES (%(namespace)s, %(palace_key)s)
            ON CONFLICT DO NOTHING
            """,
                palaces=palaces,
            )
        )

    def _writes(self, p: Parts) -> None:
        """The writes: one call of a kg_* SQL function each (sql/0002 and later)."""

        def call(fn: str, *names: str) -> str:
            args = sql.SQL(", ").join(sql.Placeholder(n) for n in ("palace", *names))
            return render(compose("SELECT {fn}({args})", fn=p.fn(fn), args=args))

        provenance = ("confidence", "source_closet", "source_file", "source_drawer_id", "adapter_name")
        self.add_entity = call("kg_add_entity", "eid", "name", "type", "attributes")
        self.add_triple = call(
            "kg_add_triple",
            "sub",
            "sub_name",
            "pred",
            "obj",
            "obj_name",
            "triple_id",
            "valid_from",
            "valid_to",
            *provenance,
        )
        self.invalidate = call("kg_invalidate", "sub", "pred", "obj", "ended")
        self.supersede = call(
            "kg_supersede",
            "sub",
            "sub_name",
            "pred",
            "old",
            "new",
            "new_name",
            "at",
            "triple_id",
            *provenance,
        )
        self.rewrite = call(
            "kg_rewrite", "old_triple_id", "pred", "obj", "obj_name", "at", "triple_id", "source_file"
        )
        # Facts of this palace among %(triple_ids)s that name no drawer are given %(drawer)s as evidence.
        self.link_evidence = render(
            compose(
                """
            UPDATE {fact} f SET properties = {kg_with}(f.properties, 'source_drawer_id', %(drawer)s)
            WHERE {in_palace} AND {source} IS NULL
              AND {kg_key}(f.properties, 'triple_id')
                  = ANY (ARRAY(SELECT {text_key}(t) FROM unnest(%(triple_ids)s::text[]) t))
            """,
                fact=p.fact,
                kg_with=p.fn("kg_with"),
                in_palace=p.in_palace("f"),
                source=p.prop("f", "source_drawer_id"),
                kg_key=p.fn("kg_key"),
                text_key=p.fn("text_key"),
            )
        )
        # The lock order (sql/0015_lock_order.sql): a transaction's entities, or its palace's whole graph.
        self.lock_entities = call("kg_lock_entities", "keys")
        self.lock_graph = call("kg_lock_graph")
        # kg_apply_entity / kg_apply_triple take a row's columns in MemPalace's order, then the flag
        self.apply_entity = call("kg_apply_entity", *REPLICATION_COLUMNS["entities"], "skip_unchanged")
        self.apply_triple = call("kg_apply_triple", *REPLICATION_COLUMNS["triples"], "skip_unchanged")

    # Long because its statement is written out as one SQL block (a clause a line), not by branching.
    def _lookups(self, p: Parts) -> None:
        """A fact's subject, whether an entity exists, and the fuzzy candidates for a name."""
        self.subject_of = render(
            compose(
                """
            SELECT {s_entity_id}
            FROM {fact} f JOIN {entity} s ON s.id = f.start_id
            WHERE {open_fact} AND {triple_is}
            """,
                s_entity_id=p.prop("s", "entity_id"),
                fact=p.fact,
                entity=p.entity,
                open_fact=p.open_fact(),
                triple_is=p.key_is("f", "triple_id", "triple_id"),
            )
        )
        self.entity_exists = render(
            compose(
                "SELECT EXISTS (SELECT 1 FROM {entity} e WHERE {in_palace} AND {not_stub} AND {id_is})",
                entity=p.entity,
                in_palace=p.in_palace("e"),
                not_stub=p.not_stub("e"),
                id_is=p.key_is("e", "entity_id", "eid"),
            )
        )
        # Candidates in write order (SQLite scans entities in rowid order), the exact id among them
        # so query_entity's fallback is one round trip. The token-array containment is a necessary
        # condition of each LIKE (and of name equality): it lets the token indexes pick the few rows
        # the LIKEs then check exactly.
        name, eid = p.prop("e", "name"), p.prop("e", "entity_id")

        def likes(column: sql.Composable, params: range) -> sql.Composed:
            return sql.SQL(" OR ").join(
                compose(
                    "{fold}({column}) LIKE {fold}({pattern})",
                    fold=p.fn("kg_fold"),
                    column=column,
                    pattern=sql.Placeholder(f"p{i}"),
                )
                for i in params
            )

        self.candidates = render(
            compose(
                """
            WITH m AS MATERIALIZED (
                SELECT {eid} AS id, {name} AS name, {seq} AS seq
                FROM {entity} e
                WHERE {in_palace} AND {not_stub}
                  AND ({id_is}
                       OR ({kg_tokens}({name}, ' ') @> %(name_tokens)s::text[]
                           AND ({name} = %(name)s OR {name_likes}))
                       OR ({kg_tokens}({eid}, '_') @> %(id_tokens)s::text[] AND ({id_likes}))))
            SELECT id, name FROM m ORDER BY seq LIMIT 5
            """,
                eid=eid,
                name=name,
                seq=p.seq("e"),
                entity=p.entity,
                in_palace=p.in_palace("e"),
                not_stub=p.not_stub("e"),
                id_is=p.key_is("e", "entity_id", "eid"),
                kg_tokens=p.fn("kg_tokens"),
                name_likes=likes(name, range(3)),
                id_likes=likes(eid, range(3, 6)),
            )
        )

    def _facts_of_entity(self, p: Parts) -> None:
        """query_entity's statements: one per shape (outgoing, incoming, both, none) and as_of or not."""
        sides = {
            side: self._side(p, name, i, near=near, far=far)
            for i, (side, (name, near, far)) in enumerate(SIDES.items())
        }
        valid_at = self._valid_at(p)
        self._query_entity = {}
        for shape in (*DIRECTIONS.values(), ()):
            for as_of in (False, True):
                chosen = [sql.SQL(" ").join([sides[s], valid_at]) if as_of else sides[s] for s in shape]
                if not chosen:  # MemPalace returns nothing for an unknown direction
                    chosen = [compose("{out} AND false", out=sides["out"])]
                union = sql.SQL(" UNION ALL ").join(chosen)
                self._query_entity[shape, as_of] = render(
                    compose("SELECT * FROM ({union}) q ORDER BY part, seq", union=union)
                )
        relationship = compose(
            "{named} WHERE {in_palace} AND {predicate_is} AND {both_named}",
            named=p.named_facts(),
            in_palace=p.in_palace("f"),
            predicate_is=p.key_is("f", "predicate", "pred"),
            both_named=p.both_named(),
        )
        self._relationship = {
            False: render(compose("{facts} ORDER BY {seq}", facts=relationship, seq=p.seq("f"))),
            True: render(
                compose(
                    "{facts} {valid_at} ORDER BY {seq}", facts=relationship, valid_at=valid_at, seq=p.seq("f")
                )
            ),
        }

    @staticmethod
    def _side(p: Parts, direction: str, part: int, *, near: str, far: str) -> sql.Composed:
        """The facts on one side of the entity ``eid``: ``near`` is the edge's end at the entity."""
        fields = sql.SQL(", ").join(
            p.prop("f", k) for k in ("predicate", "valid_from", "valid_to", "confidence", "source_closet")
        )
        return compose(
            """
            SELECT {direction}, {o_name}, {fields}, {part} AS part, {seq} AS seq
            FROM {entity} v JOIN {fact} f ON f.{near} = v.id
            JOIN {entity} o ON o.id = f.{far} AND {o_is_named}
            WHERE {vertex_is}
            """,
            direction=sql.Literal(direction),
            o_name=p.prop("o", "name"),
            fields=fields,
            part=sql.Literal(part),
            seq=p.seq("f"),
            entity=p.entity,
            fact=p.fact,
            near=sql.SQL(near),
            far=sql.SQL(far),
            o_is_named=p.not_stub("o"),
            vertex_is=p.vertex_is(),
        )

    @staticmethod
    def _valid_at(p: Parts) -> sql.Composed:
        """The fact ``f`` is valid at parameter ``as_of`` (a start key, see :func:`start_key`)."""
        return compose(
            """
            AND ({valid_from} IS NULL OR {start_key}({valid_from}) COLLATE "C" <= %(as_of)s)
            AND ({valid_to} IS NULL OR {end_key}({valid_to}) COLLATE "C" > %(as_of)s)
            """,
            valid_from=p.prop("f", "valid_from"),
            valid_to=p.prop("f", "valid_to"),
            start_key=p.fn("kg_start_key"),
            end_key=p.fn("kg_end_key"),
        )

    def _timeline(self, p: Parts) -> None:
        """timeline's statements, up to their page (see :meth:`timeline`), and their totals."""
        # In the order of the fact_timeline index (prefixes of valid_from and triple id), ties broken
        # by the whole values: MemPalace's order for every date MemPalace writes (sql/0005).
        order = compose(
            """
            ORDER BY (left({valid_from}, 64) COLLATE "C") NULLS LAST, (left({triple_id}, 200) COLLATE "C"),
                     ({valid_from} COLLATE "C") NULLS LAST, ({triple_id} COLLATE "C")
            """,
            valid_from=p.prop("f", "valid_from"),
            triple_id=p.prop("f", "triple_id"),
        )
        vertex = compose(
            "(SELECT v.id FROM {entity} v WHERE {vertex_is})", entity=p.entity, vertex_is=p.vertex_is()
        )
        touches = sql.SQL("(f.start_id = (SELECT id FROM v) OR f.end_id = (SELECT id FROM v))")
        self._timeline_of = {
            False: compose(
                "{named} WHERE {in_palace} AND {both_named} {order}",
                named=p.named_facts(),
                in_palace=p.in_palace("f"),
                both_named=p.both_named(),
                order=order,
            ),
            True: compose(
                "WITH v AS MATERIALIZED {vertex} {named} WHERE {touches} AND {both_named} {order}",
                vertex=vertex,
                named=p.named_facts(),
                touches=touches,
                both_named=p.both_named(),
                order=order,
            ),
        }
        self.timeline_total_all = render(
            compose(
                "SELECT count(*) FROM {fact} f WHERE {in_palace}", fact=p.fact, in_palace=p.in_palace("f")
            )
        )
        self.timeline_total_entity = render(
            compose(
                "WITH v AS MATERIALIZED {vertex} SELECT count(*) FROM {fact} f WHERE {touches}",
                vertex=vertex,
                fact=p.fact,
                touches=touches,
            )
        )

    # Long because its statement is written out as one SQL block (a clause a line), not by branching.
    def _summaries(self, p: Parts) -> None:
        """stats, the open facts (kg normalize) and their predicates (audit), an import's check."""
        predicate, valid_from = p.prop("f", "predicate"), p.prop("f", "valid_from")
        self.stats = render(
            compose(
                """
            SELECT (SELECT count(*) FROM {entity} e WHERE {e_in_palace} AND {e_not_stub}),
                   (SELECT count(*) FROM {fact} f WHERE {f_in_palace}),
                   (SELECT count(*) FROM {fact} f WHERE {open_fact}),
                   ARRAY(SELECT DISTINCT ({predicate} COLLATE "C") FROM {fact} f
                         WHERE {f_in_palace} ORDER BY 1)
            """,
                entity=p.entity,
                fact=p.fact,
                e_in_palace=p.in_palace("e"),
                e_not_stub=p.not_stub("e"),
                f_in_palace=p.in_palace("f"),
                open_fact=p.open_fact(),
                predicate=predicate,
            )
        )
        self.open_facts = render(
            compose(
                """
            SELECT {triple_id}, {predicate}, {s_name}, {o_name}, {valid_from}
            FROM {fact} f
            JOIN {entity} s ON s.id = f.start_id
            JOIN {entity} o ON o.id = f.end_id
            WHERE {open_fact} AND {both_named}
            ORDER BY ({valid_from} COLLATE "C") NULLS FIRST, ({predicate} COLLATE "C"), {seq}
            """,
                triple_id=p.prop("f", "triple_id"),
                predicate=predicate,
                s_name=p.prop("s", "name"),
                o_name=p.prop("o", "name"),
                valid_from=valid_from,
                fact=p.fact,
                entity=p.entity,
                open_fact=p.open_fact(),
                both_named=p.both_named(),
                seq=p.seq("f"),
            )
        )
        self.open_predicate_counts = render(
            compose(
                """
            SELECT {predicate} COLLATE "C" AS p, count(*) FROM {fact} f WHERE {open_fact}
            GROUP BY 1 ORDER BY 2 DESC, 1
            """,
                predicate=predicate,
                fact=p.fact,
                open_fact=p.open_fact(),
            )
        )
        # how many of a list of ids the palace holds (an import's check), through the key indexes
        keys = compose(
            "ARRAY(SELECT {text_key}(x) FROM unnest(%(ids)s::text[]) AS x)", text_key=p.fn("text_key")
        )
        self.held_entities = render(
            compose(
                """
            SELECT count(*) FROM {entity} e
            WHERE {in_palace} AND {not_stub} AND {kg_key}(e.properties, 'entity_id') = ANY({keys})
            """,
                entity=p.entity,
                in_palace=p.in_palace("e"),
                not_stub=p.not_stub("e"),
                kg_key=p.fn("kg_key"),
                keys=keys,
            )
        )
        self.held_triples = render(
            compose(
                """
            SELECT count(*) FROM {fact} f
            WHERE {in_palace} AND {kg_key}(f.properties, 'triple_id') = ANY({keys})
            """,
                fact=p.fact,
                in_palace=p.in_palace("f"),
                kg_key=p.fn("kg_key"),
                keys=keys,
            )
        )

    def _replication(self, p: Parts) -> None:
        """dump_rows's pages of entities and of triples, in write order."""
        entity_columns = sql.SQL(", ").join(
            [p.seq("e"), *(p.prop("e", k) for k in ("entity_id", "name", "type", "attributes", "created_at"))]
        )
        self.dump_entities = render(
            compose(
                """
            SELECT {columns} FROM {entity} e
            WHERE {in_palace} AND {not_stub} AND {seq} > %(after)s
            ORDER BY {seq} LIMIT %(limit)s
            """,
                columns=entity_columns,
                entity=p.entity,
                in_palace=p.in_palace("e"),
                not_stub=p.not_stub("e"),
                seq=p.seq("e"),
            )
        )
        fact_columns = [
            p.seq("f"),
            p.prop("f", "triple_id"),
            p.prop("s", "entity_id"),
            p.prop("f", "predicate"),
            p.prop("o", "entity_id"),
            p.prop("f", "valid_from"),
            p.prop("f", "valid_to"),
            compose("({confidence})::double precision", confidence=p.prop("f", "confidence")),
            *(
                p.prop("f", k)
                for k in ("source_closet", "source_file", "source_drawer_id", "adapter_name", "extracted_at")
            ),
        ]
        self.dump_triples = render(
            compose(
                """
            SELECT {columns}
            FROM {fact} f
            JOIN {entity} s ON s.id = f.start_id
            JOIN {entity} o ON o.id = f.end_id
            WHERE {in_palace} AND {seq} > %(after)s
            ORDER BY {seq} LIMIT %(limit)s
            """,
                columns=sql.SQL(", ").join(fact_columns),
                fact=p.fact,
                entity=p.entity,
                in_palace=p.in_palace("f"),
                seq=p.seq("f"),
            )
        )

    def query_entity(self, direction: str, as_of: bool) -> str:
        return self._query_entity[DIRECTIONS.get(direction, ()), as_of]

    def query_relationship(self, as_of: bool) -> str:
        return self._relationship[as_of]

    def timeline(self, of_entity: bool, limit: int, offset: int) -> str:
        """timeline's statement for one page, kept per page (at most STATEMENT_CACHE_SIZE of them).

        The page's LIMIT and OFFSET are written into the text (:func:`~mempalace_pg.db.sqlkit.row_count`):
        bound, they would make PostgreSQL plan the statement afresh on every call."""
        return self._pages.get(
            (of_entity, limit, offset),
            lambda: render(
                compose(
                    "{facts} LIMIT {limit} OFFSET {offset}",
                    facts=self._timeline_of[of_entity],
                    limit=row_count(limit),
                    offset=row_count(offset),
                )
            ),
        )


@functools.lru_cache(maxsize=None)
def statements(schema: str, graph: str) -> Statements:
    """The statements of the graph ``graph`` of ``schema``, built on first use and shared by every
    :class:`AgeKnowledgeGraph` of the process (MemPalace may build one per call)."""
    return Statements(schema, graph)


__all__ = [
    "REPLICATION_COLUMNS",
    "Statements",
    "statements",
]
