"""The palace marker: ``mempalace_pg.json`` in a palace directory says "this palace lives in PostgreSQL".

It names the database and the palace key (never a password); MemPalace finds the backend by it (a
file stat in ``detect()``), the knowledge-graph router and the hooks by it. Reading and checking its
content is the backend's job (:func:`mempalace_pg.store.backend.read_marker`); this module imports nothing
of MemPalace, so the hooks can use it at interpreter start.
"""

from __future__ import annotations

import os
from typing import Optional

MARKER_FILENAME = "mempalace_pg.json"
#: The backend's name, as MemPalace selects it and as the marker records it.
BACKEND_NAME = "postgres"


def marker_path(palace_dir: str) -> str:
    return os.path.join(palace_dir, MARKER_FILENAME)


def has_marker(palace_dir: Optional[str]) -> bool:
    """True when ``palace_dir`` holds the marker (a postgres palace)."""
    try:
        return bool(palace_dir) and os.path.isfile(marker_path(os.path.expanduser(palace_dir)))
    except (TypeError, ValueError):
        return False


__all__ = ["MARKER_FILENAME", "BACKEND_NAME", "marker_path", "has_marker"]
