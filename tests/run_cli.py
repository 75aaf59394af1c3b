"""The ``mempalace-pg`` command run as a user runs it: a child process, its output captured."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Optional


def run_cli(*args: str, env: Optional[dict] = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """``python -m mempalace_pg.cli ARGS`` with ``env`` as its whole environment (default: this one's)."""
    return subprocess.run(
        [sys.executable, "-m", "mempalace_pg.cli", *args],
        env=dict(os.environ) if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
