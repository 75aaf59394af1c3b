"""The palace's tools inside MemPalace's own MCP server, so a team reaches them over ``mempalace serve``.

``mempalace serve`` (MemPalace's HTTP team server: bearer token, TLS, read-only mode) runs
``python -m mempalace.mcp_server --transport http`` and serves only the tools in that module's
``TOOLS`` table. A separate server cannot be reached through it, so when the environment has
``MEMPALACE_PG_MCP_TOOLS=1`` the import hook (:mod:`mempalace_pg.hooks`) calls :func:`register`
right after ``mempalace.mcp_server`` is imported, in every process that runs MemPalace's server
(``mempalace serve``'s child inherits the variable; so do ``mempalace-mcp`` and
``python -m mempalace.mcp_server``). Opt-in, because it changes MemPalace's own tool list.

What MemPalace's table needs is ``{description, input_schema, handler, read_only}`` (the shape of its
own entries; ``TOOLS`` is the import path MemPalace 3.10's changelog keeps public). The schemas are
the ones the SDK server publishes (:mod:`~mempalace_pg.mcp_tools.server`), so both servers describe
the tools identically. Errors follow MemPalace's convention for its own tools: a result
``{"success": false, "error": ...}``.

The palace is the one MemPalace's server serves (``--palace``, or its configuration), looked up on
each call because the server applies ``--palace`` after this module runs. For a palace that is not
a postgres palace each tool answers with an error saying so. In ``--read-only`` mode
``pg_file_memory`` joins MemPalace's own write tools in the set its server hides and refuses.
"""

from __future__ import annotations

import os
import threading
from typing import Optional

from mempalace_pg.config import process_setting

ENABLE_VARIABLE = "MEMPALACE_PG_MCP_TOOLS"

_tools = {}  # palace directory -> PalaceTools
_lock = threading.Lock()


def forget() -> None:
    """Drop the tools kept per palace directory (mempalace_pg.registries)."""
    with _lock:
        _tools.clear()


def enabled() -> bool:
    return process_setting("mcp_tools")


def _palace_tools(palace: str):
    from mempalace_pg.mcp_tools.tools import PalaceTools

    with _lock:
        if palace not in _tools:
            _tools[palace] = PalaceTools(palace)
        return _tools[palace]


def _read_only(module) -> bool:
    # MemPalace keeps --read-only in a module global (set by main() after this module ran) and in the
    # environment variable its docs name.
    flag = os.environ.get("MEMPALACE_MCP_READ_ONLY", "").strip().lower() in ("1", "true", "yes", "on")
    return bool(getattr(module, "_READ_ONLY", False)) or flag


def _handler(module, method: str, read_only: bool, schema: dict):
    from mempalace_pg.graph.routing import configured_palace
    from mempalace_pg.marker import has_marker
    from mempalace_pg.mcp_tools.arguments import ToolInputError
    from mempalace_pg.mcp_tools.server import answer

    def handler(**arguments) -> dict:
        if not read_only and _read_only(module):
            return {"success": False, "error": "Server is in read-only mode; this tool is disabled"}
        missing = [a for a in schema.get("required", []) if arguments.get(a) is None]
        if missing:
            return {"success": False, "error": f"missing required argument(s) {', '.join(missing)}"}
        arguments = {k: v for k, v in arguments.items() if k in schema.get("properties", {})}
        palace: Optional[str] = configured_palace()
        if not palace or not has_marker(palace):
            return {
                "success": False,
                "error": f"the palace {palace or '(none configured)'} is not on the postgres backend; "
                "the pg_* tools need a postgres palace (mempalace init --backend postgres)",
            }
        try:
            return answer(_palace_tools(palace), method, arguments)
        except ToolInputError as exc:
            return {"success": False, "error": str(exc)}

    handler.__qualname__ = f"pg_{method}"
    return handler


def register(module) -> None:
    """Add the tools to ``module`` (``mempalace.mcp_server``)'s ``TOOLS``."""
    import anyio

    from mempalace_pg.mcp_tools.server import build_server
    from mempalace_pg.mcp_tools.tools import TOOLS, PalaceTools

    listed = {t.name: t for t in anyio.run(build_server(PalaceTools("")).list_tools)}
    for spec in TOOLS:
        schema = listed[spec.name].input_schema
        module.TOOLS[spec.name] = {
            "description": spec.description,
            "input_schema": schema,
            "handler": _handler(module, spec.method, spec.read_only, schema),
            "read_only": spec.read_only,
        }
    # A read-only server hides and refuses the tools in this set (its own writers); ours join them, so
    # MemPalace answers for pg_file_memory exactly as for mempalace_add_drawer. The handler's own check
    # stays for a MemPalace that names the set differently.
    writers = {spec.name for spec in TOOLS if not spec.read_only}
    refused = getattr(module, "_READ_ONLY_REFUSED_TOOLS", None)
    if isinstance(refused, (set, frozenset)):
        module._READ_ONLY_REFUSED_TOOLS = frozenset(refused) | writers


__all__ = ["register", "enabled", "ENABLE_VARIABLE"]
