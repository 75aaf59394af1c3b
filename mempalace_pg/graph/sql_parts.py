"""The fragments the knowledge graph's statements are built from: a dedented template composed with
psycopg's ``sql``, rendered once, and the parts every statement shares (the schema's functions, the graph's
label tables, the tests on a vertex's or edge's properties)."""

from __future__ import annotations

import textwrap

from psycopg import sql

from mempalace_pg.config import validate_identifier


def compose(template: str, **parts: sql.Composable) -> sql.Composed:
    """``template`` (dedented and trimmed, so statements can be written as indented blocks) with each
    ``{name}`` field replaced by the part of that name."""
    return sql.SQL(textwrap.dedent(template).strip()).format(**parts)


def render(statement: sql.Composable) -> str:
    """A composed statement as text, rendered once when it is built so that no call composes SQL.

    Nothing in it depends on a connection: its identifiers are names (quoted by psycopg) and its
    literals are constants of this module (property keys) or checked row counts."""
    return statement.as_string(None)


#: The shapes of query_entity's statement, by the ``direction`` it is given (any other: no facts).
DIRECTIONS = {"outgoing": ("out",), "incoming": ("in",), "both": ("out", "in")}
#: Each side of a fact as MemPalace's rows name it, the edge column that holds the entity asked about on
#: that side, and the one that holds the entity at the other end.
SIDES = {"out": ("outgoing", "start_id", "end_id"), "in": ("incoming", "end_id", "start_id")}


class Parts:
    """The fragments the statements share, for one schema and its graph: functions of the schema,
    the graph's two label tables, and the tests on a vertex's or edge's properties."""

    def __init__(self, schema: str, graph: str):
        self._schema = validate_identifier(schema, "schema")
        self.entity = sql.Identifier(graph, "Entity")
        self.fact = sql.Identifier(graph, "Fact")

    def fn(self, name: str) -> sql.Identifier:
        """A function (or table) of the schema: the kg_* functions and the key helpers of sql/0005."""
        return sql.Identifier(self._schema, name)

    def prop(self, alias: str, key: str) -> sql.Composed:
        """Property ``key`` of the vertex or edge ``alias``, as text."""
        return compose(
            "{kg_text}({alias}.properties, {key})",
            kg_text=self.fn("kg_text"),
            alias=sql.SQL(alias),
            key=sql.Literal(key),
        )

    def key_is(self, alias: str, key: str, param: str) -> sql.Composed:
        """Property ``key`` equals parameter ``param``, through the property's key index."""
        return compose(
            "{kg_key}({alias}.properties, {key}) = {text_key}({param})",
            kg_key=self.fn("kg_key"),
            alias=sql.SQL(alias),
            key=sql.Literal(key),
            text_key=self.fn("text_key"),
            param=sql.Placeholder(param),
        )

    def in_palace(self, alias: str) -> sql.Composed:
        """The vertex or edge ``alias`` belongs to the palace of parameter ``palace``."""
        return compose("{palace_of} = %(palace)s::text", palace_of=self.prop(alias, "palace"))

    def not_stub(self, alias: str) -> sql.Composed:
        """The vertex ``alias`` is an entity, not a stub standing in for a fact's missing endpoint."""
        return compose("{stub} IS NULL", stub=self.prop(alias, "stub"))

    def seq(self, alias: str) -> sql.Composed:
        """The write order of the vertex or edge ``alias``."""
        return compose("{seq}::bigint", seq=self.prop(alias, "seq"))

    def open_fact(self) -> sql.Composed:
        """The edge ``f`` is a fact of the palace that is still valid."""
        return compose(
            "{in_palace} AND {valid_to} IS NULL",
            in_palace=self.in_palace("f"),
            valid_to=self.prop("f", "valid_to"),
        )

    def both_named(self) -> sql.Composed:
        """Both endpoints of the fact, ``s`` and ``o``, are entities."""
        return compose("{s} AND {o}", s=self.not_stub("s"), o=self.not_stub("o"))

    def vertex_is(self) -> sql.Composed:
        """The vertex ``v`` is the palace's entity of parameter ``eid``."""
        return compose(
            "{in_palace} AND {id_is}",
            in_palace=self.in_palace("v"),
            id_is=self.key_is("v", "entity_id", "eid"),
        )

    def named_facts(self) -> sql.Composed:
        """A fact with its endpoints' names (the columns of query_relationship and timeline), up to
        its WHERE."""
        return compose(
            """
            SELECT {s_name}, {o_name}, {predicate}, {valid_from}, {valid_to}
            FROM {fact} f
            JOIN {entity} s ON s.id = f.start_id
            JOIN {entity} o ON o.id = f.end_id
            """,
            s_name=self.prop("s", "name"),
            o_name=self.prop("o", "name"),
            predicate=self.prop("f", "predicate"),
            valid_from=self.prop("f", "valid_from"),
            valid_to=self.prop("f", "valid_to"),
            fact=self.fact,
            entity=self.entity,
        )


__all__ = ["compose", "render", "DIRECTIONS", "SIDES", "Parts"]
