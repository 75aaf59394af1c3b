"""``mempalace-pg doctor`` and ``mempalace-pg mcp``: checking an installation, serving a palace."""

from __future__ import annotations

import json

from mempalace_pg.cli.common import (
    palace_target,
    settings_of,
)


def cmd_doctor(args) -> int:
    from mempalace_pg.tools.doctor import render, run_checks

    report = run_checks(settings_of(args), palace_path=args.palace)
    print(json.dumps(report.as_dict()) if args.json else render(report))
    return 0 if report.ok else 1


def cmd_mcp(args) -> int:
    from mempalace_pg.mcp_tools.server import main as serve

    return serve(palace_target(args)["palace_path"])


def register(sub) -> None:
    """Add this group's commands to the ``mempalace-pg`` parser's subcommands ``sub``."""
    doc = sub.add_parser("doctor", help="check the installation; each problem with the command that fixes it")
    doc.add_argument(
        "--palace", help="the palace directory to check (default: MemPalace's configured palace)"
    )
    doc.add_argument("--json", action="store_true", help="machine-readable output")
    doc.set_defaults(func=cmd_doctor)

    mcp = sub.add_parser("mcp", help="serve the palace's graph-aware tools to an AI client (MCP over stdio)")
    mcp.add_argument(
        "--palace", help="the postgres palace directory (default: MemPalace's configured palace)"
    )
    mcp.set_defaults(func=cmd_mcp)


__all__ = ["register", "cmd_doctor", "cmd_mcp"]
