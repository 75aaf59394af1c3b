"""``mempalace-pg switch <palace dir>``: make a palace the one MemPalace opens by default.

MemPalace's CLI and MCP server open the palace ``palace_path`` in its ``config.json`` names when they are
not given ``--palace``, with the backend its ``backend`` key names. This sets both, in the same file
MemPalace reads, keeping every other key, so that every MCP client started without ``--palace`` follows.
It works both ways: onto a postgres palace after ``mempalace-pg migrate``, and back onto a Chroma palace
after ``mempalace-pg move-out``. The previous values are returned, to switch back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mempalace_pg.config import ConfigError


def config_file() -> Path:
    """MemPalace's config.json (in ``$MEMPALACE_CONFIG_DIR``, else ``~/.mempalace``)."""
    from mempalace.config import MempalaceConfig

    return Path(MempalaceConfig().config_dir) / "config.json"


def palace_backend(palace: str) -> str:
    """The backend of the palace in directory ``palace``, as MemPalace detects it."""
    from mempalace.backends.registry import detect_backends_for_path

    found = detect_backends_for_path(palace)
    if not found:
        raise ConfigError(f"{palace}: no MemPalace palace there (no postgres marker, no Chroma files)")
    if len(found) > 1:
        raise ConfigError(f"{palace}: files of more than one backend there ({', '.join(found)})")
    return found[0]


def switch(palace: str) -> dict:
    """Point MemPalace's config.json at ``palace``; ``{"config_file", "palace_path", "backend",
    "before": {"palace_path", "backend"}}``."""
    from mempalace_pg.marker import write_atomically

    palace = os.path.realpath(os.path.expanduser(palace))
    backend = palace_backend(palace)
    path = config_file()
    data: dict = {}
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} is not valid JSON ({exc}); fix or remove it first") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path} does not hold a JSON object; fix or remove it first")
    before = {"palace_path": data.get("palace_path"), "backend": data.get("backend")}
    data["palace_path"], data["backend"] = palace, backend
    path.parent.mkdir(parents=True, exist_ok=True)
    with write_atomically(str(path)) as out:
        json.dump(data, out, indent=2)
        out.write("\n")
    return {"config_file": str(path), "palace_path": palace, "backend": backend, "before": before}


__all__ = ["config_file", "palace_backend", "switch"]
