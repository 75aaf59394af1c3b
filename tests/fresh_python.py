"""Code run in a fresh Python interpreter, for what only a process's start shows (which modules its
imports load, what the venv's import hooks patch): the test's own interpreter, so the venv's .pth runs."""

from __future__ import annotations

import subprocess
import sys

#: print goes to stderr: MemPalace's MCP server takes stdout for its protocol when it is imported.
_PRINT_TO_STDERR = "import sys\nprint = lambda *a: sys.stderr.write(' '.join(map(str, a)) + chr(10))\n"


def last_line(code: str, *, timeout: float = 180) -> str:
    """Run ``code`` in a fresh interpreter and return the last line it printed; it must exit 0."""
    proc = subprocess.run(
        [sys.executable, "-c", _PRINT_TO_STDERR + code], capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stderr.strip().splitlines()[-1]
