"""docs/move-in.md, run as a user runs it: in a scratch HOME, the real ``mempalace`` CLI makes a Chroma
palace and MemPalace's SQLite graph; then the page's own blocks move it in, an MCP client configured as
the page says answers from PostgreSQL, the page's checks pass, and the page's way back gives a Chroma
palace and SQLite graph MemPalace opens. Each step compares what MemPalace answers with what it answered
before. The only change made to the page's commands is the DSN: the page's example becomes a database
made for this test."""

from __future__ import annotations

import asyncio
import json
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

from tests.mcp_client import stdio_session, text_of

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "move-in.md"
README = ROOT / "README.md"
#: The example server of the pages, with or without a password: replaced by this test's database.
PAGE_DSN = re.compile(r"postgresql://[^\s\"']*@db\.lan[^\s\"']*")
BIN = Path(sys.executable).parent
QUESTIONS = ("how do I get my data back after the disk dies", "when should basil be planted")


def section_blocks(heading: str, language: str, page: Path = PAGE) -> list[str]:
    """The ``language`` code blocks of ``page``'s section ``## heading``, in order."""
    text = page.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end > 0 else len(text)]
    return re.findall(rf"^```{language}\n(.*?)^```", section, re.S | re.M)


@pytest.fixture
def user(tmp_path, pg_admin_dsn, embedding_url):
    """A user's environment: a scratch HOME holding notes, MemPalace's embedder setting, the venv on PATH,
    no setting of this plugin's, and a new database the page's DSN is replaced by."""
    database = f"movein_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    home = tmp_path / "home"
    home.mkdir()
    subprocess.run(["cp", "-r", str(ROOT / "examples" / "corpus"), str(home / "notes")], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMPALACE", "XDG_"))}
    env.update(
        HOME=str(home),
        PATH=f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}",
        MEMPALACE_EMBEDDING_MODEL="openai-compat",
        MEMPALACE_EMBEDDING_API_URL=embedding_url,
        MEMPALACE_EMBEDDING_API_MODEL="all-MiniLM-L6-v2",
    )
    dsn = make_conninfo(**{**conninfo_to_dict(pg_admin_dsn), "dbname": database})
    yield {"home": home, "env": env, "dsn": dsn}
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


def bash(script: str, user: dict, **extra) -> str:
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", PAGE_DSN.sub(user["dsn"], script)],
        env={**user["env"], **extra},
        cwd=user["home"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, f"{script}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run.stdout


def top_hits(user: dict, **extra) -> list[tuple]:
    """What ``mempalace search`` finds first for each question: (wing / room, source file) of the top two."""
    hits = []
    for q in QUESTIONS:
        out = bash(f"mempalace search {json.dumps(q)} --results 2", user, **extra)
        rooms = re.findall(r"^\s+\[\d+\] (.+)$", out, re.M)
        sources = re.findall(r"^\s+Source: (.+)$", out, re.M)
        assert rooms and len(rooms) == len(sources), out
        hits.append(tuple(zip(rooms, sources)))
    return hits


def status_counts(user: dict, **extra) -> dict:
    out = bash("mempalace status", user, **extra)
    return dict(re.findall(r"ROOM: (\S+)\s+(\d+) drawers", out))


def graph_facts(user: dict, **extra) -> list:
    script = (
        "python - <<'PY'\nimport json\nfrom mempalace.knowledge_graph import KnowledgeGraph\n"
        "kg = KnowledgeGraph()\nprint(type(kg).__name__)\n"
        "print(json.dumps(sorted((f['subject'], f['predicate'], f['object'], f['valid_from'], f['valid_to'])"
        " for f in kg.query_entity('Homelab NAS'))))\nPY"
    )
    kind, facts = bash(script, user, **extra).strip().splitlines()[-2:]
    return [kind, json.loads(facts)]


@pytest.mark.parametrize(
    "page, heading",
    [(PAGE, "Move in"), (README, "Your palace moved in, in four commands")],
    ids=["docs/move-in.md", "README.md"],
)
def test_the_move_in_page_moves_a_palace_in_and_back_out(user, page, heading):
    home = user["home"]
    # -- before: a palace and a graph as MemPalace makes them ------------------------------------------
    bash("mempalace init --yes --no-llm ~/notes && mempalace mine ~/notes", user)
    bash(
        "python - <<'PY'\nfrom mempalace.knowledge_graph import KnowledgeGraph\nkg = KnowledgeGraph()\n"
        "kg.add_triple('Homelab NAS', 'powered_by', 'UPS', valid_from='2024-01-01')\n"
        "kg.add_triple('Homelab NAS', 'backs_up_to', 'USB disk', valid_from='2023-02-01')\n"
        "kg.invalidate('Homelab NAS', 'backs_up_to', 'USB disk', ended='2025-09-01')\nPY",
        user,
    )
    assert (home / ".config" / "mempalace" / "palace" / "chroma.sqlite3").is_file()
    hits, counts, facts = top_hits(user), status_counts(user), graph_facts(user)
    assert sum(map(int, counts.values())) == 8 and len(facts[1]) == 2

    # -- the page's move in ------------------------------------------------------------------------------
    (move_in,) = section_blocks(heading, "bash", page)
    bash(move_in, user)
    config = json.loads((home / ".config" / "mempalace" / "config.json").read_text())
    palace_pg = home / ".config" / "mempalace" / "palace-pg"
    assert config["palace_path"] == str(palace_pg) and config["backend"] == "postgres"
    assert (palace_pg / "mempalace_pg.json").is_file()
    with psycopg.connect(user["dsn"]) as conn:
        assert conn.execute("SELECT count(*) FROM mempalace.drawers").fetchone()[0] == 8

    # every later process of the user's has the DSN (the page's profile line)
    dsn = {"MEMPALACE_PG_DSN": user["dsn"]}
    (check,) = section_blocks("Check it", "bash")
    out = bash(check.replace("something you know is in there", QUESTIONS[0]), user, **dsn)
    assert "backups.md" in out
    assert top_hits(user, **dsn) == hits
    assert status_counts(user, **dsn) == counts
    assert graph_facts(user, **dsn) == ["AgeKnowledgeGraph", facts[1]]

    # -- an MCP client configured as the page says ------------------------------------------------------
    (client,) = section_blocks("Your AI clients", "json")
    server = json.loads(PAGE_DSN.sub(user["dsn"], client))["mcpServers"]["mempalace"]
    asyncio.run(_client_answers_from_postgres(server, user, hits))

    # -- the page's way back -------------------------------------------------------------------------------
    (back,) = section_blocks("Moving back out", "bash")
    bash("\n".join(section_blocks("Move in", "bash")[0].splitlines()[:2]) + "\n" + back, user)
    config = json.loads((home / ".config" / "mempalace" / "config.json").read_text())
    palace_back = home / ".config" / "mempalace" / "palace-back"
    assert config["palace_path"] == str(palace_back) and config["backend"] == "chroma"
    assert (palace_back / "chroma.sqlite3").is_file() and not (palace_back / "mempalace_pg.json").exists()
    # MemPalace opens it without this plugin's settings, and answers as it did before the move
    assert top_hits(user) == hits
    assert status_counts(user) == counts
    assert graph_facts(user) == ["KnowledgeGraph", facts[1]]


async def _client_answers_from_postgres(server: dict, user: dict, hits: list) -> None:
    command = [server["command"], *server["args"]]
    env = {**user["env"], **server["env"]}
    async with stdio_session(command, env) as client:
        found = await client.call("mempalace_search", query=QUESTIONS[0], limit=2)
        sources = [os.path.basename(r.get("source_file", "")) for r in found["results"]]
        # MemPalace's MCP search ranks with its closets as well as the CLI's does not: the first hit
        assert sources[0] == hits[0][0][1], found
        facts = await client.result("mempalace_kg_query", entity="Homelab NAS")
        assert not facts.is_error and "powered_by" in text_of(facts)
    # the client's server wrote its graph to PostgreSQL, not to a SQLite file
    with psycopg.connect(user["dsn"]) as conn:
        stored = conn.execute("SELECT count(*) FROM mempalace.kg_facts").fetchone()[0]
    assert stored == 2


@pytest.mark.parametrize(
    "page, heading",
    [(PAGE, "A new palace instead"), (README, "A new palace, in four commands")],
    ids=["docs/move-in.md", "README.md"],
)
def test_a_new_palace_as_the_pages_make_it(user, page, heading):
    """The pages' new palace: MemPalace mines into PostgreSQL, becomes the default, and finds it."""
    (commands,) = section_blocks(heading, "bash", page)
    out = bash(commands, user)
    assert "decisions.md" in out  # the search the block ends with
    config = json.loads((user["home"] / ".config" / "mempalace" / "config.json").read_text())
    assert config["palace_path"] == str(user["home"] / "palace-pg") and config["backend"] == "postgres"
    with psycopg.connect(user["dsn"]) as conn:
        assert conn.execute("SELECT count(*) FROM mempalace.drawers").fetchone()[0] == 8
