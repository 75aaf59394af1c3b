"""Text as PostgreSQL can hold it: the one rule every value written or compared goes through.

PostgreSQL's ``text`` and ``jsonb`` cannot hold a NUL character (U+0000), and UTF-8 cannot encode a
lone UTF-16 surrogate (U+D800-U+DFFF, what Python makes of a file name that is not valid UTF-8, or
what an MCP client relays from a broken clipboard). Chroma and MemPalace's SQLite store such input,
and MemPalace's own ``pgvector`` backend makes it storable by stripping NUL and replacing each lone
surrogate with U+FFFD (MemPalace #1829, #1833, #1235). This plugin does exactly the same, to every
string it writes (ids, documents, metadata keys and values, knowledge-graph names and properties)
and, so that the value you wrote is the value you find, to every string a lookup or filter compares
with (ids to get or delete, ``where`` values, ``where_document`` needles, lexical queries, entity
names). A string without NUL or surrogates comes back as the same object.
"""

from __future__ import annotations

import re
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(value: str) -> str:
    """``value`` with NUL characters removed and lone surrogates replaced by U+FFFD."""
    if "\x00" in value:
        value = value.replace("\x00", "")
    if _LONE_SURROGATE.search(value):
        value = _LONE_SURROGATE.sub("\ufffd", value)
    return value


def storable_any(value: Any) -> Any:
    """:func:`storable` applied to every string inside ``value`` (dict keys and values, list and tuple
    items, recursively); other values unchanged. Tuples become lists, as JSON makes them."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(k) if isinstance(k, str) else k: storable_any(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [storable_any(v) for v in value]
    return value


__all__ = ["storable", "storable_any"]
