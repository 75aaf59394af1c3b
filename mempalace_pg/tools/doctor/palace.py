"""The palace's checks: the palace directory MemPalace is configured with, and its marker."""

from __future__ import annotations

import os
from typing import Optional

from mempalace_pg.config import Settings
from mempalace_pg.tools.doctor.report import Report


def check_palace(report: Report, settings: Settings, palace_path: Optional[str]) -> None:
    """What MemPalace will use for its configured palace (or --palace)."""
    from mempalace_pg.graph.routing import configured_palace
    from mempalace_pg.marker import MARKER_FILENAME, check_marker_target

    palace = os.path.realpath(os.path.expanduser(palace_path)) if palace_path else configured_palace()
    if not palace:
        report.add(
            "palace", "warn", "no MemPalace palace configured", "mempalace init <dir> --backend postgres"
        )
        return
    marker = os.path.join(palace, MARKER_FILENAME)
    if not os.path.isfile(marker):
        report.add("palace", "warn", *_unmarked_palace(palace, configured=not palace_path))
        return
    try:
        namespace, key = check_marker_target(palace, settings)
    except Exception as exc:  # reported as the finding
        report.add(
            "palace",
            "fail",
            f"palace {palace}: {exc}",
            "point MEMPALACE_PG_DSN / MEMPALACE_PG_SCHEMA at the database its marker names",
        )
        return
    report.add(
        "palace",
        "ok",
        f"MemPalace's palace {palace} uses the postgres backend here "
        f"(key {key!r}, namespace {namespace!r}); its knowledge graph is in AGE",
    )


def _mempalace_config_json() -> tuple:
    """(directory, settings) of MemPalace's config.json; settings are {} when it is absent or unreadable."""
    import json

    from mempalace.config import MempalaceConfig

    config_dir = str(MempalaceConfig().config_dir)
    try:
        with open(os.path.join(config_dir, "config.json"), encoding="utf-8-sig") as f:
            settings = json.load(f)
    except (OSError, ValueError):
        settings = {}
    return config_dir, settings if isinstance(settings, dict) else {}


def _unmarked_palace(palace: str, *, configured: bool) -> tuple:
    """(finding, fix) for a palace directory without the marker: which backend MemPalace will give it,
    and, for the configured palace, a config.json that selects postgres but names no palace."""
    from mempalace_pg.marker import BACKEND_NAME

    try:
        from mempalace.palace import resolve_backend_name

        selected, refusal = resolve_backend_name(palace), None
    except Exception as exc:  # MemPalace's own refusal is the finding
        selected, refusal = None, f"MemPalace refuses it: {exc}"
    config_dir, config = _mempalace_config_json()
    config_json = os.path.join(config_dir, "config.json")
    default_palace = os.path.realpath(os.path.join(config_dir, "palace"))
    if configured and config.get("backend") == BACKEND_NAME and palace == default_palace:
        # MemPalace 3.11's `init --backend` wrote {"backend": ...} over the config.json init() had
        # written (mempalace_pg.hooks keeps that now), so the user's palace is named nowhere
        return (
            f"{config_json} selects the postgres backend but names no palace_path, so MemPalace's "
            f"commands without --palace, `mempalace serve` among them, use {palace}, which "
            + ("does not exist" if not os.path.exists(palace) else "holds no postgres palace"),
            f'put "palace_path": "/path/to/your/palace" in {config_json} (until then: '
            "mempalace serve --palace /path/to/your/palace, serve's own flag)",
        )
    kind = "does not exist yet" if not os.path.exists(palace) else "holds no postgres palace (no marker)"
    if selected == BACKEND_NAME:
        return (
            f"MemPalace's palace {palace} is set to the postgres backend and {kind}: its first write "
            "creates it (`mempalace init` does not); until then `mempalace serve` answers status with "
            '"Backend open failed"',
            "mempalace mine <dir>  (or file a first memory through the server)",
        )
    return (
        f"MemPalace's palace {palace} {kind}: "
        + (refusal or f"MemPalace will use the {selected} backend there"),
        "mempalace --backend postgres mine <dir>  (or: mempalace-pg migrate --from <it> --to <new dir>)",
    )


__all__ = ["check_palace"]
