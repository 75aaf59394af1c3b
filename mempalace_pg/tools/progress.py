"""Progress bars on stderr for the long commands (``kg import``, ``migrate``).

The work itself takes a ``progress`` callback and prints nothing; the command passes one of these
printers in when it is on a terminal (or asked to with ``--progress``).
"""

from __future__ import annotations

import sys


def progress_bar(label: str, done: int, total: int, counts: str) -> None:
    """A one-line progress bar on stderr (``counts`` is the text after it), ended by a newline when
    ``done`` reaches ``total``."""
    width = 30
    filled = int(width * done / total) if total else width
    sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {counts}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def print_table_progress(table: str, done: int, total: int) -> None:
    """``kg import``'s progress: rows per graph table."""
    progress_bar(f"  {table:<8}", done, total, f"{done}/{total}")


def print_collection_progress(name: str, done: int, total: int, seconds: float) -> None:
    """``migrate``'s progress: records per collection, with the rate."""
    rate = done / seconds if seconds > 0 else 0.0
    progress_bar(f"{name:18s}", done, total, f"{done:,}/{total:,} ({rate:,.0f}/s)")


__all__ = ["progress_bar", "print_table_progress", "print_collection_progress"]
