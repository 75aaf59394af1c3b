"""Every Python block of the README and docs/ runs as it is shown, against a real server: in a scratch
HOME whose palace directory ``~/palace-pg`` the blocks use, with ``MEMPALACE_PG_DSN`` naming a new
database, each block in a process of its own (as a user pastes it into a file and runs it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def python_blocks() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for n, block in enumerate(re.findall(r"^```python\n(.*?)^```", page.read_text("utf-8"), re.S | re.M)):
            found.append((f"{page.relative_to(ROOT)}#{n + 1}", block))
    return found


BLOCKS = python_blocks()
MAKE_PALACE = """
import os
from mempalace.backends import PalaceRef
from mempalace_pg import PostgresBackend
path = os.path.expanduser("~/palace-pg")
col = PostgresBackend().get_collection(
    palace=PalaceRef(id=path, local_path=path), collection_name="mempalace_drawers", create=True
)
col.upsert(ids=["welcome"], documents=["welcome"], metadatas=[{"wing": "notes"}], embeddings=[[0.5] * 384])
"""


@pytest.fixture(scope="module")
def scratch(pg_admin_dsn, tmp_path_factory):
    database = f"docpy_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    home = tmp_path_factory.mktemp("home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMPALACE", "XDG_"))}
    env.update(
        HOME=str(home),
        MEMPALACE_PG_DSN=make_conninfo(**{**conninfo_to_dict(pg_admin_dsn), "dbname": database}),
    )
    # the palace the blocks name, as a user has it: a postgres palace directory, made here by a first
    # write (which is when the backend writes its marker)
    made = subprocess.run([sys.executable, "-c", MAKE_PALACE], env=env, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    yield env
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


def test_the_pages_have_python_to_run():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("where, block", BLOCKS, ids=[w for w, _ in BLOCKS])
def test_every_python_block_runs_as_shown(scratch, where, block):
    run = subprocess.run(
        [sys.executable, "-c", block],
        env=scratch,
        cwd=scratch["HOME"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"{where}:\n{run.stderr[-3000:]}"
    assert run.stdout.strip(), f"{where} printed nothing: every block shows its result"
