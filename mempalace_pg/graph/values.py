"""The values of MemPalace's knowledge graph as this plugin stores them: entity ids and predicate keys as
MemPalace makes them, text checked and made storable, confidence, and the keys dates sort by (the same
rules as the ``kg_*`` SQL functions of sql/0002 and sql/0005), and MemPalace's own helpers reused so that
none of them can drift from MemPalace's."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Callable, NamedTuple, Optional

from mempalace_pg.text import storable


class MemPalaceHelpers(NamedTuple):
    """MemPalace's own code that the graph reuses, so that ids and date rules cannot drift from
    MemPalace's."""

    #: ``mempalace.knowledge_graph`` (its SQLite class, ``_escape_like``)
    knowledge_graph: Any
    #: ``sanitize_iso_temporal(value, field)``: a date or timestamp checked as MemPalace checks it
    sanitize: Callable[[Any, str], Optional[str]]
    #: ``make_triple_id(subject, predicate, object, valid_from, now)``
    make_triple_id: Callable[..., str]


_MEMPALACE: Optional[MemPalaceHelpers] = None


def mempalace_helpers() -> MemPalaceHelpers:
    """MemPalace's helpers, imported on first use."""
    global _MEMPALACE
    if _MEMPALACE is None:
        from mempalace import knowledge_graph as kgm
        from mempalace.config import sanitize_iso_temporal
        from mempalace.ids import make_triple_id

        _MEMPALACE = MemPalaceHelpers(kgm, sanitize_iso_temporal, make_triple_id)
    return _MEMPALACE


_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold(value: str) -> str:
    """SQLite LIKE's case folding (ASCII letters only), as kg_fold() does in SQL."""
    return value.translate(_ASCII_FOLD)


#: kg_tokens() (sql/0005) cuts each token of a name to this many characters for its index.
_TOKEN_PREFIX = 200


def name_tokens(value: str, sep: str) -> list[str]:
    """The tokens of a name as the candidate indexes hold them (kg_tokens() in SQL)."""
    return [t[:_TOKEN_PREFIX] for t in fold(value).split(sep)]


def entity_id_of(name: str) -> str:
    """The id MemPalace gives the entity named ``name`` (``KnowledgeGraph._entity_id``)."""
    return name.lower().replace(" ", "_").replace("'", "")


def predicate_key(predicate: str) -> str:
    """A predicate as MemPalace stores and compares it (``KnowledgeGraph.add_triple``)."""
    return predicate.lower().replace(" ", "_")


def checked_text(value: Any, field: str, *, required: bool = False) -> Optional[str]:
    """A caller's string as the graph stores it and compares it: made storable (NUL stripped, lone
    surrogates replaced, as :mod:`mempalace_pg.text` does for drawers). Anything but a string or None
    raises ``ValueError`` naming ``field``, and so does None when ``required``."""
    if value is None:
        if required:
            raise ValueError(f"{field} is required")
        return None
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, not {type(value).__name__}")
    return storable(value)


def confidence_of(value: Any) -> Optional[float]:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"confidence must be a number, not {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"confidence must be finite, not {value!r}")
    return number


def float_or_none(value: Any) -> Optional[float]:
    return None if value is None else float(value)


def boundary_of(at: Optional[str]) -> str:
    """supersede/rewrite boundary: now (UTC, to the second) or ``at``, a date meaning its midnight."""
    _, sanitize, _ = mempalace_helpers()
    if at is None:
        boundary = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    else:
        boundary = start_key(at) if isinstance(at, str) else at
    return sanitize(boundary, "at")


def start_key(value: Optional[str]) -> Optional[str]:
    """The key a validity interval starting at ``value`` (a sanitized date or timestamp) sorts by: a
    bare date means its midnight, as kg_start_key() has it in SQL."""
    if value is not None and len(value) == 10 and value[4] == "-" and value[7] == "-":
        return f"{value}T00:00:00Z"
    return value


def end_key(value: Optional[str]) -> Optional[str]:
    """The key an interval ending at ``value`` sorts by: a bare date means its last second (kg_end_key())."""
    if value is not None and len(value) == 10 and value[4] == "-" and value[7] == "-":
        return f"{value}T23:59:59Z"
    return value


def provenance(confidence, source_closet, source_file, source_drawer_id, adapter_name) -> dict:
    return {
        "confidence": confidence_of(confidence),
        "source_closet": checked_text(source_closet, "source_closet"),
        "source_file": checked_text(source_file, "source_file"),
        "source_drawer_id": checked_text(source_drawer_id, "source_drawer_id"),
        "adapter_name": checked_text(adapter_name, "adapter_name"),
    }


def fact_row(name: str, row: tuple) -> dict:
    """One query_entity result: ``name`` is the queried entity as passed (MemPalace's convention)."""
    direction, other, predicate, valid_from, valid_to, confidence, source_closet = row[:7]
    return {
        "direction": direction,
        "subject": name if direction == "outgoing" else other,
        "predicate": predicate,
        "object": other if direction == "outgoing" else name,
        "valid_from": valid_from,
        "valid_to": valid_to,
        "confidence": None if confidence is None else float(confidence),
        "source_closet": source_closet,
        "current": valid_to is None,
    }


__all__ = [
    "MemPalaceHelpers",
    "mempalace_helpers",
    "fold",
    "name_tokens",
    "entity_id_of",
    "predicate_key",
    "checked_text",
    "confidence_of",
    "float_or_none",
    "boundary_of",
    "start_key",
    "end_key",
    "provenance",
    "fact_row",
]
