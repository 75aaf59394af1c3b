"""What the command groups share: settings from the global options, the palace a command names, and the
options that name it."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any, Callable, Iterable

from mempalace_pg.config import ConfigError, Settings


def report(args, result: Any, lines: Callable[[], Iterable[str]], *, ok: bool = True) -> int:
    """Print what a command did or found, and return its exit code (1 when not ``ok``): with ``--json``
    one JSON document (``result``, or its ``as_dict()``), else the lines ``lines()`` yields for a person."""
    if getattr(args, "json", False):
        print(json.dumps(result.as_dict() if hasattr(result, "as_dict") else result))
    else:
        for line in lines():
            print(line)
    return 0 if ok else 1


def settings_of(args) -> Settings:
    return Settings.load({"dsn": getattr(args, "dsn", None), "schema": getattr(args, "schema", None)})


def palace_target(args) -> dict:
    """Which palace a command means: --palace DIR (or --palace-key), else the palace holding the SQLite
    file being imported, else MemPalace's configured palace. Keyword arguments for AgeKnowledgeGraph
    and PalaceSearch."""

    from mempalace_pg.graph.routing import configured_palace
    from mempalace_pg.marker import has_marker

    settings = settings_of(args)
    if getattr(args, "palace_key", None):
        return {"palace_key": args.palace_key, "namespace": args.namespace, "settings": settings}
    candidates = []
    if getattr(args, "palace", None):
        candidates.append(os.path.realpath(os.path.expanduser(args.palace)))
    else:
        if getattr(args, "sqlite", None):
            candidates.append(os.path.dirname(os.path.realpath(args.sqlite)))
        configured = configured_palace()
        if configured:
            candidates.append(configured)
    for palace in candidates:
        if has_marker(palace):
            return {"palace_path": palace, "settings": settings}
    raise ConfigError(
        f"no postgres palace found (looked at {', '.join(candidates) or 'nothing'}): pass --palace DIR "
        "(a palace created with `mempalace --backend postgres ...`) or --palace-key KEY"
    )


def open_kg(args):
    """The AGE knowledge graph of the palace the command means (see _palace_target)."""
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    return AgeKnowledgeGraph(**palace_target(args))


# -- search: the graph joined with the drawers (mempalace_pg.retrieval) ------------------------------
def open_search(args):
    from mempalace_pg.retrieval import PalaceSearch

    return PalaceSearch(**palace_target(args))


def palace_handles(args, *, create: bool):
    """(drawers collection, knowledge graph) of the palace a command means; with ``create`` a palace
    directory that is not one yet becomes a postgres palace."""

    from mempalace_pg.atomic import open_drawers
    from mempalace_pg.marker import has_marker

    settings = settings_of(args)
    if create and getattr(args, "palace", None) and not has_marker(os.path.expanduser(args.palace)):
        from mempalace.backends.base import PalaceRef

        from mempalace_pg.store.backend import PostgresBackend
        from mempalace_pg.store.partition import DRAWERS_COLLECTION

        path = os.path.realpath(os.path.expanduser(args.palace))
        PostgresBackend().open_collection(
            settings,
            palace=PalaceRef(id=path, local_path=path),
            collection_name=DRAWERS_COLLECTION,
            create=True,
        )
    target = palace_target(args)
    return open_drawers(
        target.get("palace_path"),
        palace_key=target.get("palace_key"),
        namespace=target.get("namespace"),
        settings=settings,
        create=create,
    )


def palace_args(p: argparse.ArgumentParser) -> None:
    """The options that name a palace, and ``--json``."""
    p.add_argument("--palace", help="the postgres palace directory (default: MemPalace's configured palace)")
    p.add_argument("--palace-key", help="the palace key, for a palace without a directory")
    p.add_argument("--namespace", help="the palace's namespace (with --palace-key)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


__all__ = [
    "report",
    "settings_of",
    "palace_target",
    "open_kg",
    "open_search",
    "palace_handles",
    "palace_args",
]
