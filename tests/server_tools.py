"""The provisioned server's own client programs (pg_dump, pg_restore), for tests that run them.

A server of scripts/provision-postgres.sh runs from a Debian root under MEMPALACE_PG_ROOT_BASE, whose
programs match its major version; the host's may not. Any other server's must be on PATH.
"""

from __future__ import annotations

import atexit
import functools
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import psycopg


def server_tool(dsn: str, tool: str) -> str:
    """The server's own pg_dump / pg_restore: from the provisioned Debian root, else from PATH."""
    stack = os.environ.get("MEMPALACE_PG_TEST_STACK", "")
    with psycopg.connect(dsn) as conn:
        major = conn.info.server_version // 10000
    if stack in ("trixie", "sid"):
        root = Path(os.environ.get("MEMPALACE_PG_ROOT_BASE", "/var/tmp/mempalace-pg")) / stack
        return chroot_tool(str(root), f"/usr/lib/postgresql/{major}/bin/{tool}")
    version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    assert f") {major}." in version, (
        f"{tool} on PATH is {version.strip()}; the server is {major}: put a matching one first"
    )
    return tool


CHROOT_TOOL = """#!/bin/sh
# {path} of the provisioned server's Debian root, written by tests/server_tools.py. Files outside the
# root that the tool must read are linked into a folder inside it for the run, removed after it: a password
# file (PGPASSFILE: the application role's DSN names one, scripts/as_app_role.py), and an argument naming
# a file (`pg_restore --jobs` reads its dump itself), as a pg_restore installed beside the server would.
inside=$(mktemp -d {root}/tmp/tool.XXXXXX) || exit 1
trap 'rm -rf "$inside"' EXIT
if [ -z "${{PGPASSWORD:-}}" ] && [ -n "${{PGPASSFILE:-}}" ] && [ -r "$PGPASSFILE" ]; then
    cp "$PGPASSFILE" "$inside/pgpass" && chmod 600 "$inside/pgpass" || exit 1
    export PGPASSFILE="/tmp/${{inside##*/}}/pgpass"
fi
n=0
for arg in "$@"; do
    shift
    case "$arg" in
        /*) if [ -f "$arg" ]; then
                n=$((n + 1))
                ln "$arg" "$inside/arg$n" 2>/dev/null || cp "$arg" "$inside/arg$n" || exit 1
                arg="/tmp/${{inside##*/}}/arg$n"
            fi ;;
    esac
    set -- "$@" "$arg"
done
chroot {root} {path} "$@"
"""


@functools.cache
def chroot_tool(root: str, path: str) -> str:
    """A command that runs ``path`` in the Debian root ``root``, as ``chroot ROOT PATH`` would, with the
    password file the DSN names made readable there."""
    folder = Path(tempfile.mkdtemp(prefix="mempalace-pg-tool-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    script = folder / Path(path).name
    script.write_text(CHROOT_TOOL.format(root=shlex.quote(root), path=shlex.quote(path)))
    script.chmod(0o700)
    return shlex.quote(str(script))
