"""Every way mempalace-pg changes MemPalace itself, in one place.

MemPalace 3.11 gives a storage plugin one seam, its backend entry point. Several of its commands
bypass the backend and read a palace's SQLite files directly, or bind names before plugins load, so
a palace on this backend would fail or silently differ there. Each patch below hands MemPalace the
PostgreSQL answer for a palace whose directory holds this plugin's marker, and leaves every other
palace exactly as MemPalace would treat it:

=====================================  ========================================================
MemPalace module (what is patched)     why
=====================================  ========================================================
``knowledge_graph`` (KnowledgeGraph)   the MCP server, ``mine --source``, the fact checker,
                                       Hermes and ``kg normalize`` build it themselves: the
                                       router (:mod:`mempalace_pg.graph.routing`) gives postgres
                                       palaces the AGE graph
``palace`` (multi-writer backends)     PostgreSQL coordinates concurrent writers; without this an
                                       MCP server locks ``mempalace mine`` out
``palace_graph``                       tunnels, hallways ``--rebuild``, audit and the MCP graph
(sqlite_grouped_counts_reader)         tools group drawers by room/wing/hall from Chroma's or
                                       sqlite_exact's tables only; here from PostgreSQL
``palace_audit`` (resolve_kg_path,     ``kg normalize`` and ``audit`` look for
_read_kg, _wing_source_counts_reader)  ``knowledge_graph.sqlite3`` and read it raw; here the
                                       palace's AGE graph (a stray SQLite file is never read);
                                       audit's transcript-project mix, from PostgreSQL
``kg_normalize`` (off_vocabulary_      reads the open facts through ``kg._conn()``, raw SQLite
facts)
``mcp_server`` (_sqlite_taxonomy,     status, list_wings, list_rooms, get_taxonomy and
_sqlite_graph_stats)                   graph_stats count wings and rooms from Chroma's tables;
                                       here from the counts PostgreSQL keeps, so drawers
                                       without a wing show as ``unknown`` exactly as on Chroma
``mcp_server`` (tool_list_drawers)     reads every drawer in scope to return one page; here the
                                       page is chosen in SQL (:mod:`mempalace_pg.store.listing`)
``mcp_server`` (TOOLS), only with      the pg_* tools (:mod:`mempalace_pg.mcp_tools`) in
``MEMPALACE_PG_MCP_TOOLS=1``           MemPalace's own server, so over ``mempalace serve``
``backends.chroma``                    ``mempalace status`` tallies wings and rooms with Chroma's
(_sqlite_wing_room_counts)             reader whatever the backend; for a postgres palace, from
                                       the counts PostgreSQL keeps (no scan of the drawers)
``config`` (MempalaceConfig.           ``mempalace init --backend postgres`` on a new config
set_backend), for ``postgres`` only    directory: ``init()`` writes the default config.json
                                       (palace_path, collection_name, topic_wings,
                                       hall_keywords) but not into the object, and
                                       ``set_backend`` then writes ``{"backend": ...}`` alone
                                       over it. Without palace_path every later command without
                                       ``--palace`` (``serve``) uses ``<config dir>/palace``,
                                       and ``mempalace --palace P mine`` mines P into Chroma
``cli`` (cmd_serve)                    ``serve``'s own ``--palace`` (default None) drops the
                                       global one: ``mempalace --palace P serve`` serves
                                       config.json's palace_path. For a postgres palace (or with
                                       ``--backend postgres``) it serves P
``backends`` (the ``base`` attribute)  the plugin's own commands load ``backends.base`` alone
                                       (:mod:`mempalace_pg.backend_base`); when the package runs
                                       later it reuses the module but does not bind it: bound here
``chromadb`` (imported, its body       every MemPalace module imports the Chroma backend, which
deferred: :mod:`mempalace_pg.          imports chromadb: most of a command's start on a postgres
lazy_chromadb`)                        palace. Its package body (and chromadb.config's) runs at
                                       Chroma's first real use
=====================================  ========================================================

How the patches get in: the import hook of :mod:`mempalace_pg.patching` (on ``sys.meta_path``)
runs each patch right after its module has been executed, before anything can bind the name it
replaces. The hook is installed when Python starts, by the one-line ``mempalace_pg_hooks.pth`` this
package puts in site-packages, because some MemPalace commands (``kg normalize``) bind names before
MemPalace imports its plugins. Importing :mod:`mempalace_pg` registers :data:`PATCHES` and installs
the hook, and :func:`mempalace_pg.patching.apply_pending` (called from the backend's ``detect()``,
which MemPalace calls before it uses any of these) patches modules that finished importing before
the hook was there. Installing is cheap and imports nothing of MemPalace.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from typing import Callable, Optional

from mempalace_pg import backend_base, lazy_chromadb, patching
from mempalace_pg.marker import BACKEND_NAME, MARKER_FILENAME
from mempalace_pg.marker import has_marker as _is_postgres_palace

log = logging.getLogger(__name__)


def _palace_key(palace_path: str) -> str:
    """The palace key this palace's marker records (what the backend knows it by)."""
    from mempalace_pg.marker import read_marker

    marker = read_marker(os.path.expanduser(palace_path)) or {}
    return str((marker.get("postgres") or {}).get("palace_key") or palace_path)


def _drawers(palace_path: str, collection_name: str):
    """(backend, collection) of a postgres palace, opened read-only; (None, None) when it has none."""
    from mempalace.backends.base import CollectionNotInitializedError, PalaceNotFoundError, PalaceRef

    from mempalace_pg.store.backend import PostgresBackend

    backend = PostgresBackend()
    path = os.path.expanduser(palace_path)
    try:
        col = backend.get_collection(
            palace=PalaceRef(id=_palace_key(path), local_path=path),
            collection_name=collection_name,
            options={"read_only": True},
        )
    except (CollectionNotInitializedError, PalaceNotFoundError):
        backend.close()
        return None, None
    return backend, col


# -- the patches ---------------------------------------------------------------------------------


def _swap(module, patched: Callable, original: Callable) -> None:
    """Put ``patched`` in ``module`` in place of ``original``, under ``patched``'s own name (each patch
    is named as the function it replaces), with the original's metadata and the original itself
    reachable as ``__wrapped__``."""
    name = patched.__name__
    setattr(module, name, functools.update_wrapper(patched, original))


def _patch_knowledge_graph(module) -> None:
    """``KnowledgeGraph`` routed per palace, where it is defined and where it was bound already."""
    from mempalace_pg.graph.routing import install

    install(module)


def _patch_palace(module) -> None:
    current = getattr(module, "_MULTI_PROCESS_WRITER_BACKENDS", None)
    if isinstance(current, frozenset) and BACKEND_NAME not in current:
        module._MULTI_PROCESS_WRITER_BACKENDS = current | {BACKEND_NAME}


def _read(palace_path: str, collection_name: str, what: str):
    """``store.counts.<what>(partition)`` of a postgres palace's collection; None when it has none."""
    from mempalace_pg.store import counts

    backend, col = _drawers(palace_path, collection_name)
    if col is None:
        return None
    try:
        return getattr(counts, what)(col.partition)
    finally:
        backend.close()


def grouped_counts_reader(palace_path: str, collection_name: str) -> Optional[list]:
    """``(room, wing, hall, n, last_date)`` rows of a postgres palace, the shape of MemPalace's
    ``sqlite_room_wing_hall_counts``; None when the palace has no drawers collection."""
    return _read(palace_path, collection_name, "grouped_counts")


def wing_source_counts_reader(palace_path: str, collection_name: str) -> Optional[list]:
    """``(wing, source_file, n)`` rows of a postgres palace's transcript drawers, the shape of
    MemPalace's ``sqlite_wing_source_counts``."""
    return _read(palace_path, collection_name, "wing_source_counts")


def _selected_postgres(palace_path: Optional[str]) -> bool:
    """The palace is a postgres palace and MemPalace resolves it to this backend."""
    if not _is_postgres_palace(palace_path):
        return False
    try:
        from mempalace.palace import resolve_backend_name

        selected = resolve_backend_name(palace_path, explicit=os.environ.get("MEMPALACE_BACKEND_EXPLICIT"))
        return selected == BACKEND_NAME
    except Exception:  # MemPalace reports a mismatch on its own paths
        return False


def _patch_palace_graph(module) -> None:
    original = module.sqlite_grouped_counts_reader

    def sqlite_grouped_counts_reader(config=None):
        reader = original(config)
        if reader is not None:
            return reader
        from mempalace.config import MempalaceConfig

        config = config or MempalaceConfig()
        return grouped_counts_reader if _selected_postgres(config.palace_path) else None

    _swap(module, sqlite_grouped_counts_reader, original)


def _read_age_kg(marker_path: str) -> Optional[dict]:
    """``mempalace audit``'s knowledge-graph figures for a postgres palace (the shape of
    ``palace_audit._read_kg``), from its AGE graph."""
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    kg = AgeKnowledgeGraph(palace_path=os.path.dirname(marker_path))
    try:
        stats = kg.stats()
        predicates = kg.open_predicate_counts()
    finally:
        kg.close()
    current = stats["current_facts"]
    one_off = sorted(p for p, n in predicates.items() if n == 1)
    reuse = 0.0 if current == 0 else 1.0 - (len(predicates) / current)
    from mempalace import palace_audit

    return {
        "path": marker_path,
        "entities": int(stats["entities"]),
        "triples": int(stats["triples"]),
        "current_facts": int(current),
        "expired_facts": int(stats["expired_facts"]),
        "distinct_predicates": len(predicates),
        "one_off_predicates": len(one_off),
        "one_off_sample": one_off[: getattr(palace_audit, "_SAMPLE_LIMIT", 10)],
        "predicate_reuse": round(reuse, 4),
    }


def _patch_palace_audit(module) -> None:
    resolve, read, sources = module.resolve_kg_path, module._read_kg, module._wing_source_counts_reader

    def resolve_kg_path(palace_path: str, explicit: bool = False) -> str:
        # A postgres palace's graph is in its database: name the marker (a file that exists, so
        # `kg normalize` goes on; the router and _read_kg below know it), never a SQLite file.
        if _is_postgres_palace(palace_path):
            return os.path.join(os.path.expanduser(palace_path), MARKER_FILENAME)
        return resolve(palace_path, explicit)

    def _read_kg(kg_path: str):
        if os.path.basename(str(kg_path)) == MARKER_FILENAME and os.path.isfile(kg_path):
            return _read_age_kg(kg_path)
        return read(kg_path)

    def _wing_source_counts_reader(config):
        reader = sources(config)
        if reader is None and _selected_postgres(config.palace_path):
            return wing_source_counts_reader
        return reader

    for patched, original in (
        (resolve_kg_path, resolve),
        (_read_kg, read),
        (_wing_source_counts_reader, sources),
    ):
        _swap(module, patched, original)


def _patch_kg_normalize(module) -> None:
    original = module.off_vocabulary_facts

    def off_vocabulary_facts(kg, vocabulary):
        from mempalace_pg.graph.kg import AgeKnowledgeGraph

        if not isinstance(kg, AgeKnowledgeGraph):
            return original(kg, vocabulary)
        allowed = {v.lower() for v in vocabulary}
        return [f for f in kg.open_facts() if str(f["predicate"]).lower() not in allowed]

    _swap(module, off_vocabulary_facts, original)


def _patch_mcp_server(module) -> None:
    from mempalace_pg.mcp_tools import in_mempalace

    _patch_knowledge_graph(module)
    for name, replacement in (
        ("_sqlite_taxonomy", _mcp_taxonomy),
        ("_sqlite_graph_stats", _mcp_graph_stats),
        ("tool_list_drawers", _mcp_list_drawers),
    ):
        original = getattr(module, name, None)
        if original is not None:
            _swap(module, replacement(module, original), original)
            _rebind_handler(module, original, getattr(module, name))
    if in_mempalace.enabled():  # last, and on its own: a failure here must not undo the patches above
        try:
            in_mempalace.register(module)
        except Exception:  # MemPalace's server keeps working without the pg_* tools
            log.warning("mempalace-pg could not add its MCP tools to MemPalace's server", exc_info=True)


def _mcp_postgres(module) -> bool:
    """The MCP server's palace is a postgres palace MemPalace resolves to this backend."""
    config = module._config
    if not _is_postgres_palace(config.palace_path):
        return False
    try:
        return module._selected_backend_name() == BACKEND_NAME
    except Exception:  # as MemPalace's fast paths: fall back to the collection
        return False


def _mcp_taxonomy(module, original):
    """MemPalace's ``_sqlite_taxonomy`` (status, list_wings, list_rooms, get_taxonomy) for a postgres
    palace: the wing/room tally from the counts PostgreSQL keeps, normalised as MemPalace normalises
    Chroma's (a missing wing or room reads "unknown")."""

    def _sqlite_taxonomy():
        if not _mcp_postgres(module):
            return original()
        config = module._config
        counts = _read(config.palace_path, config.collection_name, "wing_room_counts")
        if counts is None:
            return None
        total, wing_rooms = counts
        normalized: dict = {}
        for wing, rooms in wing_rooms.items():
            dest = normalized.setdefault("unknown" if wing in (None, "?") else wing, {})
            for room, n in rooms.items():
                key = "unknown" if room in (None, "?") else room
                dest[key] = dest.get(key, 0) + n
        return total, normalized

    return _sqlite_taxonomy


def _mcp_graph_stats(module, original):
    """MemPalace's ``_sqlite_graph_stats`` (graph_stats) for a postgres palace: rebuilt by MemPalace's
    own ``_graph_stats_from_grouped_rows`` from the grouped counts, as it is from Chroma's tables."""

    def _sqlite_graph_stats():
        if not _mcp_postgres(module):
            return original()
        config = module._config
        rows = grouped_counts_reader(config.palace_path, config.collection_name)
        return None if rows is None else module._graph_stats_from_grouped_rows(rows)

    return _sqlite_graph_stats


def _mcp_list_drawers(module, original):
    """MemPalace's ``tool_list_drawers`` for a postgres palace: the page chosen in SQL
    (:func:`mempalace_pg.store.listing.logical_page`) instead of every drawer in scope read, folded and
    sorted in Python; the page's entries and previews built by MemPalace's own code from its rows, so
    they are what MemPalace builds. A ``since``/``before`` window (parsed by MemPalace, dates of any
    form) stays on MemPalace's path."""

    def tool_list_drawers(wing=None, room=None, since=None, before=None, limit=20, offset=0):
        if since or before or not _mcp_postgres(module):
            return original(wing=wing, room=room, since=since, before=before, limit=limit, offset=offset)
        from mempalace_pg.store.listing import logical_page

        limit = max(1, min(limit, module._MAX_RESULTS))
        offset = max(0, offset)
        try:
            wing = module._sanitize_optional_name(wing, "wing")
            room = module._sanitize_optional_name(room, "room")
        except ValueError as e:
            return {"error": str(e)}
        try:
            col = module._get_collection()
            if not col:
                return module._collection_error_or_no_palace()
            ids, total = logical_page(
                col.partition, wing=wing or None, room=room or None, limit=limit, offset=offset
            )
            rows = col.get(ids=ids, include=["metadatas"]) if ids else None
            page = (
                module._collapse_drawer_rows(
                    module._chroma_field(rows, "ids", []), [], module._chroma_field(rows, "metadatas", [])
                )
                if rows
                else []
            )
            module._fill_drawer_previews(col, page)
            return {"drawers": page, "total": total, "count": len(page), "offset": offset, "limit": limit}
        except Exception as e:  # MemPalace's tools answer errors, as its own does here
            log.exception("tool_list_drawers failed")
            return {"error": str(e)}

    return tool_list_drawers


def _rebind_handler(module, original, patched) -> None:
    """MemPalace's ``TOOLS`` table holds its handlers themselves: point the entries of ``original`` at
    ``patched`` (the ``_sqlite_*`` helpers are looked up by name and have none)."""
    for entry in (getattr(module, "TOOLS", None) or {}).values():
        if isinstance(entry, dict) and entry.get("handler") is original:
            entry["handler"] = patched


def _patch_backends_package(module) -> None:
    backend_base.adopt(module)


def _patch_chroma_module(module) -> None:
    original = module._sqlite_wing_room_counts

    def _sqlite_wing_room_counts(palace_path: str, collection_name: str):
        # `mempalace status` asks Chroma's reader directly, whatever the backend.
        if _is_postgres_palace(palace_path):
            return _read(palace_path, collection_name, "wing_room_counts")
        return original(palace_path, collection_name)

    _swap(module, _sqlite_wing_room_counts, original)


def _init_wrote(config) -> dict:
    """The config.json ``MempalaceConfig.init()`` wrote for ``config``: the file's settings when there
    was no file as ``config`` read it (``init()`` writes one only then) and it now holds a JSON object;
    otherwise (the file was there before, or is unreadable) nothing, and MemPalace's own rules apply."""
    import json

    if getattr(config, "_file_config_state", "absent") != "absent":
        return {}
    try:
        with open(os.path.join(config.config_dir, "config.json"), encoding="utf-8-sig") as f:
            written = json.load(f)
    except (OSError, ValueError):
        return {}
    return written if isinstance(written, dict) else {}


def _patch_config(module) -> None:
    cls = module.MempalaceConfig
    original = cls.set_backend

    def set_backend(self, backend: str) -> None:
        # `mempalace init` calls cfg.init(), which writes the default config.json without putting it in
        # cfg's settings, then cfg.set_backend(), which writes cfg's settings, {"backend": ...} alone,
        # over that file. Keep what init() wrote (cfg's own settings win), as a Chroma palace's init does.
        if str(backend).strip().lower() == BACKEND_NAME:
            for key, value in _init_wrote(self).items():
                self._file_config.setdefault(key, value)
        original(self, backend)

    _swap(cls, set_backend, original)


def global_palace(argv: list) -> Optional[str]:
    """The global ``--palace`` of a ``mempalace [--palace P] [--backend B] serve ...`` command line (the
    one given before ``serve``), parsed as MemPalace's parser parses it; None when there is none or the
    command line is not one of ``serve``."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):  # never print or exit: the command line is MemPalace's to judge
            raise ValueError(message)

    parser = Parser(add_help=False)
    parser.add_argument("--palace")
    parser.add_argument("--backend")
    parser.add_subparsers(dest="command").add_parser("serve", add_help=False)
    try:
        given, _ = parser.parse_known_args(argv)
    except ValueError:
        return None
    return given.palace if given.command == "serve" else None


def _patch_source_context(module) -> None:
    """``PalaceContext``: on a postgres palace, while a mine runs, each item in one transaction."""
    from mempalace_pg.mining import item_context

    module.PalaceContext = item_context(module.PalaceContext)


def _patch_cli(module) -> None:
    from mempalace_pg.mining import item_mining

    mine = getattr(module, "mine_source_adapter", None)
    if mine is not None:
        _swap(module, item_mining(mine), mine)
    original = module.cmd_serve

    def cmd_serve(args):
        # serve's own --palace defaults to None over the global one, so `mempalace --palace P serve`
        # serves config.json's palace_path. Give it P when P is a postgres palace or the command
        # selects this backend; any other palace is served as MemPalace serves it.
        if not getattr(args, "palace", None):
            palace = global_palace(sys.argv[1:])
            if palace and (
                _is_postgres_palace(palace) or os.environ.get("MEMPALACE_BACKEND_EXPLICIT") == BACKEND_NAME
            ):
                args.palace = palace
        return original(args)

    _swap(module, cmd_serve, original)


#: MemPalace module -> its patch, applied once, right after the module is executed.
PATCHES: dict[str, Callable] = {
    "mempalace.knowledge_graph": _patch_knowledge_graph,
    "mempalace.palace": _patch_palace,
    "mempalace.palace_graph": _patch_palace_graph,
    "mempalace.palace_audit": _patch_palace_audit,
    "mempalace.kg_normalize": _patch_kg_normalize,
    "mempalace.mcp_server": _patch_mcp_server,
    "mempalace.backends": _patch_backends_package,
    "mempalace.backends.chroma": _patch_chroma_module,
    "mempalace.integrations.hermes": _patch_knowledge_graph,
    "mempalace.config": _patch_config,
    "mempalace.cli": _patch_cli,
    "mempalace.sources.context": _patch_source_context,
}


def install() -> None:
    """Register the patches with the import hook, put the hook on ``sys.meta_path`` (once) and patch
    what is already imported."""
    patching.register(PATCHES)
    patching.install()
    lazy_chromadb.install()


__all__ = [
    "install",
    "PATCHES",
    "global_palace",
    "grouped_counts_reader",
    "wing_source_counts_reader",
]
