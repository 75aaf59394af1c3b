"""The real ``mempalace`` CLI, in subprocesses, on a palace stored by this backend.

Embeddings come from scripts/embedding_server.py (MemPalace's deterministic hashing embedder,
served through MemPalace's ``openai-compat`` setting), so nothing is downloaded.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from palace_pair import Palace

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "corpus"


@pytest.fixture
def cli(embedding_url, tmp_path):
    palace = Palace(tmp_path, "postgres", embedding_url)

    def run(*args, check=True):
        proc = palace.cli(*args, timeout=300)
        if check and proc["rc"] != 0:
            raise AssertionError(f"mempalace {' '.join(args)} exited {proc['rc']}:\n{proc['out']}")
        return proc["out"]

    run.palace = palace.path
    run.env = palace.env
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
            (str(cli.palace),),
        ).fetchall()
        model = conn.execute(
            f"SELECT c.embedder_model FROM {pg_schema}.collections c "
            f"JOIN {pg_schema}.palaces p USING (palace_pk) "
            "WHERE p.palace_key = %s AND c.name = 'mempalace_drawers'",
            (str(cli.palace),),
        ).fetchone()
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


def test_graph_and_vector_search_commands(cli, tmp_path, pg_env):
    """`mempalace-pg search ...` on a palace mined by the real CLI, with facts drawn from its drawers,
    embedding the query text with MemPalace's configured embedder (the same as `mempalace search`)."""
    import json

    from mempalace_pg.atomic import open_drawers

    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    cli("init", "--backend", "postgres", "--yes", "--no-llm", str(corpus))
    cli("--backend", "postgres", "mine", str(corpus))
    drawers, kg = open_drawers(str(cli.palace), create=False)
    rows = drawers.get(include=["documents", "metadatas"])
    by_file = {Path(m["source_file"]).name: i for i, m in zip(rows.ids, rows.metadatas)}
    garden, ingest = by_file["garden.md"], by_file["ingest.py"]
    kg.add_triple("Alice", "tends", "Herb Garden", valid_from="2026-03-01", source_drawer_id=garden)
    kg.add_triple("Herb Garden", "grows", "Basil", source_drawer_id=garden)
    kg.add_triple("Alice", "maintains", "Ingest Script", source_drawer_id=ingest)

    env = cli.env  # the same embedder settings as the mempalace CLI used
    tool = str(Path(sys.executable).with_name("mempalace-pg"))

    def pg(*args):
        proc = subprocess.run(
            [tool, *args, "--palace", str(cli.palace)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    out = pg("search", "around", "Alice", "basil garden", "--hops", "2")
    first = out.splitlines()[1]
    assert out.startswith("Alice: 3 entities within 2 hop(s), 3 facts, 2 source drawers")
    assert garden in first and "Alice —tends→ Herb Garden" in out and "Herb Garden —grows→ Basil" in out
    data = json.loads(pg("search", "around", "Alice", "basil garden", "--hops", "1", "--json"))
    assert [h["id"] for h in data["hits"]] == [garden, ingest] and data["entities"] == 3
    out = pg("search", "around", "Nobody", "basil")
    assert "no entity 'Nobody'" in out

    out = pg("search", "facts", "Alice", "--query", "binary COPY drawers", "--as-of", "2026-06-01")
    assert out.index("Ingest Script") < out.index("Herb Garden")  # the drawer nearer the query first
    assert f"from drawer {ingest} (present)" in out
    out = pg("search", "facts", "Alice", "--as-of", "2026-01-01")
    assert "Herb Garden" not in out and "Ingest Script" in out

    data = json.loads(pg("search", "entities", "basil garden", "--json", "--drawers", "1"))
    assert {e["name"] for e in data} == {"Alice", "Herb Garden", "Basil"}
    assert all(e["best_drawer"] == garden for e in data)

    out = pg("search", "hybrid", "basil", "-n", "2")
    assert out.splitlines()[0].split()[1] == garden and "text #1" in out.splitlines()[0]
    out = pg("search", "hybrid", "basil", "--room", "code")
    assert garden not in out
