"""mempalace-pg's command line: ``mempalace-pg --help`` lists the commands, each group in its module
(``db``, ``kg``, ``search``, the whole-palace jobs, ``doctor`` and ``mcp``), its options beside it.

Settings come from the same places as the plugin's (MEMPALACE_PG_* / config.json postgres_*),
and ``--dsn`` / ``--schema`` override them. Errors print one line, never a password, and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from mempalace_pg import backend_base
from mempalace_pg.cli import db, kg, palace, search, service
from mempalace_pg.config import ConfigError

DESCRIPTION = (
    "mempalace-pg: a MemPalace palace in PostgreSQL. Settings come from MEMPALACE_PG_* and MemPalace's "
    "config.json (postgres_*); --dsn and --schema override them."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mempalace-pg", description=DESCRIPTION)
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: MEMPALACE_PG_DSN, config.json postgres_dsn)")
    parser.add_argument("--schema", help="schema name (default: MEMPALACE_PG_SCHEMA or 'mempalace')")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (db, kg, palace, service, search):
        group.register(sub)
    return parser


def _is_backend_error(exc: BaseException) -> bool:
    """``exc`` is MemPalace's ``BackendError`` (ours are too). Asked without importing MemPalace's
    backends, which import chromadb: a command that never imported them raised none."""
    base = sys.modules.get("mempalace.backends.base")
    return base is not None and isinstance(exc, base.BackendError)


def main(argv: Optional[list[str]] = None) -> int:
    # before any command imports the store: MemPalace's backend base alone, not every backend it ships
    # (a command that uses them, migrate from Chroma, imports them then)
    backend_base.load()
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`... | head`): stop quietly, as other Unix tools do
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # ours and bad input are reported; anything else is a bug
        if not (isinstance(exc, (ConfigError, ValueError)) or _is_backend_error(exc)):
            raise
        print(f"mempalace-pg: error: {exc}", file=sys.stderr)
        return 2


__all__ = ["main", "build_parser"]
