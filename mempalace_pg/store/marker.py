"""The palace marker: ``mempalace_pg.json`` in a palace directory says "this palace lives in PostgreSQL".

It names the database and the palace key (never a password); MemPalace finds the backend by it (a
file stat in ``detect()``), the knowledge-graph router and the hooks by it. Reading and checking its
content is the backend's job (:func:`mempalace_pg.store.backend.read_marker`); this module imports nothing
of MemPalace, so the hooks can use it at interpreter start.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import IO, Iterator, Optional

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


@contextmanager
def write_atomically(path: str, *, binary: bool = False) -> Iterator[IO]:
    """An open file whose content replaces ``path`` when the block ends without an exception.

    It is a temporary file beside ``path`` (the process id in its name, so two processes writing the
    same file do not share one), moved over ``path`` by ``os.replace``: a reader sees the old file or
    the whole new one, and a write cut short never leaves a file that looks complete. On an exception
    the temporary file is removed and ``path`` is left as it was. Text is UTF-8."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") if binary else open(tmp, "w", encoding="utf-8") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except FileNotFoundError:
            pass
        raise


__all__ = ["MARKER_FILENAME", "BACKEND_NAME", "marker_path", "has_marker", "write_atomically"]
