"""The palace marker: ``mempalace_pg.json`` in a palace directory says "this palace lives in PostgreSQL".

It names the database and the palace key (never a password); MemPalace finds the backend by it (a
file stat in ``detect()``), the knowledge-graph router and the hooks by it. Reading and checking its
content is :func:`read_marker` and :func:`check_marker_target`. It sits beside the foundation (config,
errors) because the store, the graph and the hooks all read it, and it imports MemPalace only inside
the functions that raise its errors, so the hooks can use it at interpreter start.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from typing import IO, Callable, Iterator, Optional

from mempalace_pg.config import Settings, dsn_target

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


def read_marker(palace_dir: str) -> Optional[dict]:
    """The palace's marker, None when there is none; BackendMismatchError when it is unreadable."""
    from mempalace.backends.base import BackendMismatchError

    path = marker_path(palace_dir)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            marker = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        raise BackendMismatchError(f"the mempalace-pg marker {path} is unreadable: {exc}") from None
    if not isinstance(marker, dict) or marker.get("backend") != BACKEND_NAME:
        raise BackendMismatchError(f"{path} does not identify a palace of the postgres backend")
    return marker


def recorded_target(marker: dict, palace_dir: str, *, require_key: bool = False) -> dict:
    """The marker's ``postgres`` section, the database it names (BackendMismatchError when it has none,
    or, with ``require_key``, none with a palace key)."""
    from mempalace.backends.base import BackendMismatchError

    recorded = marker.get("postgres")
    if not isinstance(recorded, dict) or (require_key and not recorded.get("palace_key")):
        raise BackendMismatchError(f"{marker_path(palace_dir)} has no target section")
    return recorded


#: What may differ between a marker and the settings when the database reached holds the palace: its
#: address (a hot standby, the same server through a pooler or under another name, a restored copy). The
#: database name, schema, namespace and palace are the palace's identity there.
ADDRESS_MAY_DIFFER = frozenset({"host", "port"})


def check_same_target(
    palace_dir: str,
    recorded: dict,
    target: dict,
    keys: tuple,
    fix: str,
    holds_palace: Optional[Callable[[dict], bool]] = None,
) -> None:
    """BackendMismatchError naming each of ``keys`` on which the marker's ``recorded`` target and the
    current settings' ``target`` differ, and ``fix``. When only the address differs and
    ``holds_palace(recorded)`` says the database reached already holds this palace, that is the palace
    reached another way (a standby, a pooler, a new address), and no error: what the marker guards
    against, a palace silently begun afresh in another database, cannot happen there."""
    from mempalace.backends.base import BackendMismatchError

    differing = [k for k in keys if recorded.get(k) != target.get(k)]
    if (
        differing
        and holds_palace is not None
        and set(differing) <= ADDRESS_MAY_DIFFER
        and holds_palace(recorded)
    ):
        return
    if differing:
        was = ", ".join(f"{k}={recorded.get(k)!r}" for k in differing)
        now = ", ".join(f"{k}={target.get(k)!r}" for k in differing)
        raise BackendMismatchError(
            f"palace {palace_dir} lives in PostgreSQL at {was}, "
            f"but the current settings point at {now}. {fix}"
        )


def check_marker_target(
    palace_dir: str, settings: Settings, holds_palace: Optional[Callable[[dict], bool]] = None
) -> tuple[str, str]:
    """(namespace, palace key) recorded in a palace's marker, after checking that the marker names
    the database the current settings point at, or one that (``holds_palace``) holds the palace
    (BackendMismatchError otherwise)."""
    from mempalace.backends.base import BackendMismatchError

    marker = read_marker(palace_dir)
    if marker is None:
        raise BackendMismatchError(f"{palace_dir} is not a mempalace-pg palace (no {MARKER_FILENAME})")
    recorded = recorded_target(marker, palace_dir, require_key=True)
    target = dsn_target(settings.dsn)
    target["schema"] = settings.schema
    check_same_target(
        palace_dir,
        recorded,
        target,
        ("host", "port", "dbname", "schema"),
        "Set MEMPALACE_PG_DSN / MEMPALACE_PG_SCHEMA (or the postgres_* keys in config.json) back.",
        holds_palace,
    )
    return str(recorded.get("namespace") or ""), str(recorded["palace_key"])


__all__ = [
    "BACKEND_NAME",
    "MARKER_FILENAME",
    "check_marker_target",
    "check_same_target",
    "has_marker",
    "marker_path",
    "read_marker",
    "recorded_target",
    "write_atomically",
]
