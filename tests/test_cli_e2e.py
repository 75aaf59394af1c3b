"""The real ``mempalace`` CLI, in subprocesses, on a palace stored by this backend.

Embeddings come from scripts/embedding_server.py (MemPalace's deterministic hashing embedder,
served through MemPalace's ``openai-compat`` setting), so nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "data" / "corpus"
MEMPALACE = str(Path(sys.executable).with_name("mempalace"))


@pytest.fixture(scope="module")
def embedding_url(tmp_path_factory):
    port_file = tmp_path_factory.mktemp("emb") / "port"
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "embedding_server.py"), "--model", "hash",
                             "--port", "0", "--port-file", str(port_file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"embedding server did not start: {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port_file.read_text().strip()}"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def cli(embedding_url, tmp_path):
    env = dict(os.environ)
    env.update(
        MEMPALACE_EMBEDDING_MODEL="openai-compat",
        MEMPALACE_EMBEDDING_API_URL=embedding_url,
        MEMPALACE_EMBEDDING_API_MODEL="hash",
        MEMPALACE_CONFIG_DIR=str(tmp_path / "config"),
        HOME=str(tmp_path / "home"),
        NO_COLOR="1",
    )
    palace = tmp_path / "palace"

    def run(*args, check=True):
        proc = subprocess.run([MEMPALACE, "--palace", str(palace), *args], env=env, capture_output=True,
                              text=True, timeout=300, stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise AssertionError(f"mempalace {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout + proc.stderr

    run.palace = palace
    return run


def test_init_mine_search_status(cli, tmp_path, pg_dsn, pg_schema):
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    out = cli("init", "--backend", "postgres", "--yes", "--no-llm", str(corpus))
    assert "Config saved" in out
    out = cli("--backend", "postgres", "mine", str(corpus))
    assert "Drawers filed: 3" in out
    assert (cli.palace / "mempalace_pg.json").is_file()
    assert not (cli.palace / "chroma.sqlite3").exists()

    out = cli("search", "basil garden")  # no flag: the marker makes MemPalace pick this backend
    first = out.split("[1]", 1)[1].split("[2]", 1)[0]
    assert "garden.md" in first and "basil" in first

    out = cli("search", "binary COPY drawers", "--room", "code")
    assert "ingest.py" in out and "garden.md" not in out

    out = cli("status")
    assert "3 drawers" in out
    assert "documentation" in out and "code" in out

    # mining again changes nothing: every file is already filed
    out = cli("mine", str(corpus))
    assert "Drawers filed: 0" in out

    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            f"SELECT room, source_file FROM {pg_schema}.drawers WHERE palace = %s ORDER BY source_file",
            (str(cli.palace),)).fetchall()
        model = conn.execute(
            f"SELECT c.embedder_model FROM {pg_schema}.collections c JOIN {pg_schema}.palaces p USING (palace_pk) "
            "WHERE p.palace_key = %s AND c.name = 'mempalace_drawers'", (str(cli.palace),)).fetchone()
    assert [r[0] for r in rows] == ["code", "documentation", "documentation"]
    assert rows[0][1].endswith("ingest.py")
    assert model == ("openai-compat",)


def test_wake_up_reads_recent_drawers(cli, tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    cli("--backend", "postgres", "mine", str(corpus))
    out = cli("wake-up")
    assert "No palace found" not in out
    assert "basil" in out or "PostgreSQL" in out or "ingest" in out
