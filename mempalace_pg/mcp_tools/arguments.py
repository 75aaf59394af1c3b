"""Checks of a tool's arguments: MemPalace's own where it has them, each failure a
:class:`ToolInputError` naming the argument and what to pass instead."""

from __future__ import annotations

from typing import Any, Callable, Optional

#: ``limit`` is clamped to 1..MAX_RESULTS, as MemPalace's ``mempalace_search`` clamps its own.
MAX_RESULTS = 100


class ToolInputError(ValueError):
    """A tool was called with an argument it cannot use; the message says which and what to pass."""


def _checked(check: Callable, value: Any, field: str) -> Any:
    try:
        return check(value, field)
    except ValueError as exc:
        raise ToolInputError(str(exc)) from None


def name(value: Any, field: str) -> str:
    from mempalace.config import sanitize_name

    return _checked(sanitize_name, value, field)


def optional_name(value: Any, field: str) -> Optional[str]:
    # blank means "no filter", as MemPalace's own tools read it
    return None if value is None or (isinstance(value, str) and not value.strip()) else name(value, field)


def entity_name(value: Any, field: str = "entity") -> str:
    from mempalace.config import sanitize_kg_value

    return _checked(sanitize_kg_value, value, field)


def date(value: Any, field: str) -> Optional[str]:
    from mempalace.config import sanitize_iso_temporal

    if value is not None and not isinstance(value, str):
        raise ToolInputError(f"{field} must be a date string (YYYY-MM-DD), not {type(value).__name__}")
    return _checked(sanitize_iso_temporal, value, field) or None


def query_text(value: Any, field: str = "query") -> str:
    from mempalace.query_sanitizer import sanitize_query

    if not isinstance(value, str) or not value.strip():
        raise ToolInputError(f"{field} must be a non-empty string")
    return sanitize_query(value)["clean_query"]


def whole_number(value: Any, field: str, low: int, high: int, *, clamp: bool) -> int:
    """An integer argument; ``clamp`` brings it into [low, high] (as MemPalace does for limits),
    otherwise outside that range is an error."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ToolInputError(f"{field} must be a whole number")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ToolInputError(f"{field} must be a whole number, not {value!r}") from None
    if isinstance(value, float) and number != value:
        raise ToolInputError(f"{field} must be a whole number, not {value!r}")
    if clamp:
        return max(low, min(number, high))
    if not low <= number <= high:
        raise ToolInputError(f"{field} must be between {low} and {high}, not {number}")
    return number


def flag(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ToolInputError(f"{field} must be true or false, not {value!r}")
    return value


def weight(value: Any, field: str) -> float:
    """A fusion weight from 0 to 1 (retrieval.hybrid's rule)."""
    from mempalace_pg.retrieval.hybrid import checked_weight

    return _checked(lambda v, _field: checked_weight(v), value, field)


def choice(value: Any, field: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ToolInputError(f"{field} must be one of {', '.join(allowed)}, not {value!r}")
    return value


__all__ = [
    "MAX_RESULTS",
    "ToolInputError",
    "name",
    "optional_name",
    "entity_name",
    "date",
    "query_text",
    "whole_number",
    "choice",
    "flag",
    "weight",
]
