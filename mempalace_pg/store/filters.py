"""Compile MemPalace ``where`` / ``where_document`` filters to SQL with bound parameters.

The semantics are exactly those of MemPalace's reference evaluator (``_matches_where`` in
``mempalace/backends/pgvector.py``, identical in sqlite_exact and chroma):

* a top-level dict is an implicit AND; ``$and`` / ``$or`` take lists of sub-filters;
* ``field: scalar`` is Python ``==``; ``field: {op: operand, ...}`` ANDs the operators;
* a missing field compares as ``None`` (so ``$ne`` / ``$nin`` match records without it);
* ``bool`` compares as ``int`` (``True == 1``);
* ``$contains`` on metadata is a substring test on ``str(actual or "")``;
* ``$gt $gte $lt $lte`` are false where Python would raise ``TypeError`` (str against number, None);
* ``where_document`` knows ``$contains`` (case-sensitive substring), ``$and`` and ``$or``.

Any other operator raises :class:`UnsupportedFilterError`. Values are always bound parameters,
as named placeholders (``%(f0)s``, ``%(f1)s``, ...: a statement that holds a filter passes its
parameters as one dict); field names are bound too (``metadata -> %(f0)s``), never spliced into
the SQL text. The four
metadata fields MemPalace filters by most (wing, room, source_file, filed_at) also exist as
indexed columns holding the value when it is a string, and string comparisons on them use
those columns.
"""

from __future__ import annotations

import json
import math
from typing import Any, Optional

from mempalace.backends.base import UnsupportedFilterError
from psycopg import sql

from mempalace_pg.text import storable_any

WHERE_OPERATORS = frozenset({"$eq", "$ne", "$in", "$nin", "$contains", "$gt", "$gte", "$lt", "$lte"})
DOCUMENT_OPERATORS = frozenset({"$contains", "$and", "$or"})
#: Metadata keys stored as generated, indexed text columns (value present only when it is a string).
STRING_COLUMNS = frozenset({"wing", "room", "source_file", "filed_at"})
#: How many leading characters of each of those columns their indexes hold (sql/0005_long_values.sql):
#: an equality is found through the index by its prefix, then checked on the whole value.
INDEX_PREFIX = {"wing": 256, "room": 256, "source_file": 600, "filed_at": 256}

#: $in over at most this many strings on a non-column field probes the metadata GIN index per value
#: (MemPalace looks up chunk groups by parent_drawer_id this way).
CONTAINMENT_IN_MAX = 32

_TRUE = sql.SQL("TRUE")
_FALSE = sql.SQL("FALSE")
_COMPARE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise UnsupportedFilterError(f"filter value {value!r} cannot be compared: {exc}") from None


class _Compiler:
    def __init__(self, metadata_column: sql.Composable, document_column: sql.Composable, prefix: str):
        self.meta = metadata_column
        self.doc = document_column
        self.prefix = prefix
        self.params: dict[str, Any] = {}

    def param(self, value: Any) -> sql.Composable:
        """A named placeholder bound to ``value`` (each value its own name, in order of appearance)."""
        name = f"{self.prefix}{len(self.params)}"
        self.params[name] = value
        return sql.Placeholder(name)

    # -- helpers -------------------------------------------------------------------------
    def field(self, name: str) -> sql.Composable:
        if not isinstance(name, str):
            raise UnsupportedFilterError(f"metadata field names must be strings, not {name!r}")
        return sql.SQL("({} -> {})").format(self.meta, self.param(name))

    def equals(self, name: str, expected: Any) -> sql.Composable:
        """SQL that is TRUE exactly when Python's ``meta.get(name) == expected`` is True (never NULL)."""
        if not isinstance(name, str):
            raise UnsupportedFilterError(f"metadata field names must be strings, not {name!r}")
        if expected is None:
            return sql.SQL("({f} IS NULL OR {f} = 'null'::jsonb)").format(f=self.field(name))
        if isinstance(expected, str):
            if name in STRING_COLUMNS:
                # The index finds the prefix; "col = v AND col IS NOT NULL" decides, and is never NULL
                # (so NOT works for $ne).
                n = INDEX_PREFIX[name]
                return sql.SQL("(left({c}, {n}) = {p}::text AND {c} = {v}::text AND {c} IS NOT NULL)").format(
                    c=sql.Identifier(name),
                    n=sql.Literal(n),
                    p=self.param(expected[:n]),
                    v=self.param(expected),
                )
            # Containment first, for the GIN index; then the exact test ({"f": ["v"]} contains {"f": "v"}).
            return sql.SQL("({m} @> {j}::jsonb AND {f} = {v}::jsonb)").format(
                m=self.meta,
                j=self.param(json.dumps({name: expected}, ensure_ascii=False)),
                f=self.field(name),
                v=self.param(_json_text(expected)),
            )
        if isinstance(expected, bool) or _is_number(expected):
            if isinstance(expected, float) and not math.isfinite(expected):
                return _FALSE  # JSON numbers are finite: nothing stored equals inf or nan
            number = int(expected) if isinstance(expected, bool) else expected
            candidates = [_json_text(number)]
            if number == 1:
                candidates.append("true")
            elif number == 0:
                candidates.append("false")
            return sql.SQL("({} = ANY({}::jsonb[])) IS TRUE").format(self.field(name), self.param(candidates))
        return sql.SQL("({} = {}::jsonb) IS TRUE").format(self.field(name), self.param(_json_text(expected)))

    def member(self, name: str, values: Any) -> sql.Composable:
        if not isinstance(values, (list, tuple)):
            raise UnsupportedFilterError(f"$in/$nin on {name!r} needs a list, not {values!r}")
        if not values:
            return _FALSE
        strings = [v for v in values if isinstance(v, str)]
        others = [v for v in values if not isinstance(v, str)]
        parts: list[sql.Composable] = []
        if strings:
            if name in STRING_COLUMNS:
                n = INDEX_PREFIX[name]
                parts.append(
                    sql.SQL(
                        "(left({c}, {n}) = ANY({p}::text[]) AND {c} = ANY({v}::text[]) AND {c} IS NOT NULL)"
                    ).format(
                        c=sql.Identifier(name),
                        n=sql.Literal(n),
                        p=self.param(sorted({v[:n] for v in strings})),
                        v=self.param(strings),
                    )
                )
            elif len(strings) <= CONTAINMENT_IN_MAX:
                # One containment test per value (a BitmapOr over the GIN index), then the exact test
                # (containment also matches a value inside an array).
                probes = _join(
                    [
                        sql.SQL("{} @> {}::jsonb").format(
                            self.meta, self.param(json.dumps({name: v}, ensure_ascii=False))
                        )
                        for v in strings
                    ],
                    " OR ",
                )
                parts.append(
                    sql.SQL("({} AND ({} = ANY({}::jsonb[])) IS TRUE)").format(
                        probes, self.field(name), self.param([_json_text(v) for v in strings])
                    )
                )
            else:
                parts.append(
                    sql.SQL("({} = ANY({}::jsonb[])) IS TRUE").format(
                        self.field(name), self.param([_json_text(v) for v in strings])
                    )
                )
        parts.extend(self.equals(name, v) for v in others)
        return _join(parts, " OR ")

    def numeric_value(self, name: str) -> sql.Composable:
        field = self.field(name)
        return sql.SQL(
            "(CASE jsonb_typeof({f}) WHEN 'number' THEN ({m} ->> {k})::numeric "
            "WHEN 'boolean' THEN (({m} ->> {k})::boolean)::int::numeric END)"
        ).format(f=field, m=self.meta, k=self.param(name))

    def compare(self, name: str, op: str, expected: Any) -> sql.Composable:
        operator = sql.SQL(_COMPARE[op])
        if isinstance(expected, bool) or _is_number(expected):
            if isinstance(expected, float) and math.isnan(expected):
                return _FALSE
            if isinstance(expected, float) and math.isinf(expected):
                # Every finite number is below +inf and above -inf.
                below = (expected > 0) == (op in ("$lt", "$lte"))
                return sql.SQL("({} IS NOT NULL)").format(self.numeric_value(name)) if below else _FALSE
            number = int(expected) if isinstance(expected, bool) else expected
            return sql.SQL("({} {} {}::numeric) IS TRUE").format(
                self.numeric_value(name),
                operator,
                self.param(str(number) if isinstance(number, int) else repr(number)),
            )
        if isinstance(expected, str):
            if name in STRING_COLUMNS:
                value = sql.SQL('{} COLLATE "C"').format(sql.Identifier(name))
            else:
                value = sql.SQL(
                    "(CASE WHEN jsonb_typeof({f}) = 'string' THEN {m} ->> {k} END) COLLATE \"C\""
                ).format(f=self.field(name), m=self.meta, k=self.param(name))
            return sql.SQL("({} {} {}::text) IS TRUE").format(value, operator, self.param(expected))
        return _FALSE  # Python raises TypeError comparing with None, lists, dicts: the evaluator says False

    def contains(self, name: str, expected: Any) -> sql.Composable:
        if isinstance(expected, bool):
            expected = int(expected)
        needle = str(expected)
        field = self.field(name)
        # str(actual or ""), with bool coerced to int first, as the evaluator does.
        text = sql.SQL(
            "(CASE jsonb_typeof({f}) "
            "WHEN 'string' THEN {m} ->> {k} "
            "WHEN 'boolean' THEN CASE WHEN ({m} ->> {k})::boolean THEN '1' ELSE '' END "
            "WHEN 'number' THEN CASE WHEN ({m} ->> {k})::numeric = 0 THEN '' ELSE {m} ->> {k} END "
            "WHEN 'null' THEN '' "
            "WHEN NULL THEN '' "
            "ELSE {m} ->> {k} END)"
        ).format(f=field, m=self.meta, k=self.param(name))
        return sql.SQL("(strpos(COALESCE({}, ''), {}::text) > 0)").format(text, self.param(needle))

    # -- the grammar ----------------------------------------------------------------------
    def where(self, node: Any) -> sql.Composable:
        if not isinstance(node, dict):
            raise UnsupportedFilterError(f"a where filter must be a dict, not {type(node).__name__}")
        parts: list[sql.Composable] = []
        for key, expected in node.items():
            if key in ("$and", "$or"):
                parts.append(_logical(key, expected, self.where))
                continue
            if isinstance(key, str) and key.startswith("$"):
                raise UnsupportedFilterError(
                    f"operator {key!r} is not supported at the top of a where filter"
                )
            if isinstance(expected, dict):
                ops = []
                for op, operand in expected.items():
                    if op not in WHERE_OPERATORS:
                        raise UnsupportedFilterError(
                            f"operator {op!r} is not supported (supported: "
                            f"{', '.join(sorted(WHERE_OPERATORS))})"
                        )
                    ops.append(self.operator(key, op, operand))
                parts.append(_join(ops, " AND ") if ops else _TRUE)
            else:
                parts.append(self.equals(key, expected))
        return _join(parts, " AND ") if parts else _TRUE

    def operator(self, name: str, op: str, operand: Any) -> sql.Composable:
        if op == "$eq":
            return self.equals(name, operand)
        if op == "$ne":
            return sql.SQL("(NOT {})").format(self.equals(name, operand))
        if op == "$in":
            return self.member(name, operand)
        if op == "$nin":
            return sql.SQL("(NOT {})").format(self.member(name, operand))
        if op == "$contains":
            return self.contains(name, operand)
        return self.compare(name, op, operand)

    def document(self, node: Any) -> sql.Composable:
        if not isinstance(node, dict):
            raise UnsupportedFilterError(f"where_document must be a dict, not {type(node).__name__}")
        parts = []
        for key, value in node.items():
            if key == "$contains":
                parts.append(sql.SQL("(strpos({}, {}::text) > 0)").format(self.doc, self.param(str(value))))
            elif key in ("$and", "$or"):
                parts.append(_logical(key, value, self.document))
            else:
                raise UnsupportedFilterError(
                    f"where_document operator {key!r} is not supported (supported: $contains, $and, $or)"
                )
        return _join(parts, " AND ") if parts else _TRUE


def _logical(op: str, clauses: Any, compile_clause) -> sql.Composable:
    """``$and`` / ``$or`` over a list of sub-filters (an empty ``$and`` is true, an empty ``$or`` false)."""
    if not isinstance(clauses, (list, tuple)):
        raise UnsupportedFilterError(f"{op} needs a list of filters, not {clauses!r}")
    compiled = [compile_clause(c) for c in clauses]
    if not compiled:
        return _TRUE if op == "$and" else _FALSE
    return _join(compiled, " AND " if op == "$and" else " OR ")


def _join(parts: list[sql.Composable], sep: str) -> sql.Composable:
    if len(parts) == 1:
        return parts[0]
    return sql.SQL("(") + sql.SQL(sep).join(parts) + sql.SQL(")")


def wing_room_equalities(where: Optional[dict]) -> Optional[dict]:
    """``{"wing": w, "room": r}`` (either or both, string values) when ``where`` says exactly that,
    in any of the shapes MemPalace sends (``{"wing": w}``, ``{"$and": [{"wing": w}, {"room": r}]}``,
    ``{"wing": {"$eq": w}}``, ...); ``{}`` for no filter; None for anything else."""
    if not where:
        return {}
    where = storable_any(where)
    if not isinstance(where, dict):
        return None
    found: dict = {}
    clauses = [where]
    while clauses:
        clause = clauses.pop()
        if not isinstance(clause, dict):
            return None
        for key, value in clause.items():
            if key == "$and" and isinstance(value, (list, tuple)):
                clauses.extend(value)
                continue
            if key not in ("wing", "room"):
                return None
            if isinstance(value, dict):
                if set(value) != {"$eq"}:
                    return None
                value = value["$eq"]
            if not isinstance(value, str) or found.get(key, value) != value:
                return None
            found[key] = value
    return found


def compile_filters(
    where: Optional[dict],
    where_document: Optional[dict] = None,
    *,
    metadata_column: sql.Composable = sql.Identifier("metadata"),
    document_column: sql.Composable = sql.Identifier("document"),
    prefix: str = "f",
) -> tuple[sql.Composable, dict]:
    """Return ``(condition, params)`` for ``WHERE``: ``TRUE`` and ``{}`` when there is no filter.

    ``params`` maps each named placeholder of ``condition`` (``prefix`` + a number) to its value.
    Raises :class:`UnsupportedFilterError` for an unknown operator or a malformed filter.
    """
    compiler = _Compiler(metadata_column, document_column, prefix)
    # Values compared are made storable as written values are (see mempalace_pg.text).
    where, where_document = storable_any(where), storable_any(where_document)
    parts = []
    if where:
        parts.append(compiler.where(where))
    elif where is not None and not isinstance(where, dict):
        raise UnsupportedFilterError(f"a where filter must be a dict, not {type(where).__name__}")
    if where_document:
        parts.append(compiler.document(where_document))
    elif where_document is not None and not isinstance(where_document, dict):
        raise UnsupportedFilterError("where_document must be a dict")
    if not parts:
        return _TRUE, {}
    return _join(parts, " AND "), compiler.params


__all__ = [
    "compile_filters",
    "wing_room_equalities",
    "WHERE_OPERATORS",
    "DOCUMENT_OPERATORS",
    "STRING_COLUMNS",
    "INDEX_PREFIX",
]
