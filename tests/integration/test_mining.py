"""``mempalace mine DIR --source NAME`` (RFC 002) on a postgres palace: an item's drawers and facts
commit together or not at all, and its facts point at its drawers (mempalace_pg.mining).

The adapter is one the test registers (``mempalace.sources.register``, MemPalace's way for tests and
local development: MemPalace drops PYTHONPATH entries from ``sys.path``, so an entry point outside the
installed packages is never seen); the mine is MemPalace's own command, ``mempalace.cli.main``, in a
process of its own.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import psycopg

from mempalace_pg.atomic import open_drawers

from palace_pair import Palace

ADAPTER = '''
from pathlib import Path

from mempalace.sources import AdapterSchema, BaseSourceAdapter, DrawerRecord


class NotesAdapter(BaseSourceAdapter):
    """Each *.txt file is an item: blocks separated by blank lines are drawers, "fact: s | p | o" a
    fact written where it stands ("fact: s | p | o | drawer id" naming its evidence), "boom" a failure
    there."""

    name = "notes-kg"
    adapter_version = "1.0.0"
    capabilities = frozenset({"supports_kg_triples"})

    def describe_schema(self):
        return AdapterSchema(fields={}, version="1")

    def ingest(self, *, source, palace):
        for path in sorted(Path(source.local_path).glob("*.txt")):
            chunk = 0
            for block in path.read_text(encoding="utf-8").split("\\n\\n"):
                block = block.strip()
                if block.startswith("fact:"):
                    s, p, o, *evidence = (x.strip() for x in block[5:].split("|"))
                    drawer = {"source_drawer_id": evidence[0]} if evidence else {}
                    palace.knowledge_graph.add_triple(s, p, o, source_file=str(path), **drawer)
                elif block == "boom":
                    raise RuntimeError(f"the notes adapter failed in {path.name}")
                elif block:
                    meta = {"wing": "notes", "room": path.stem}
                    yield DrawerRecord(content=block, source_file=str(path), chunk_index=chunk, metadata=meta)
                    chunk += 1
'''


RUNNER = """
import sys

import mempalace  # first: it drops PYTHONPATH's entries from sys.path

sys.path.insert(0, {site!r})
from mempalace.cli import main
from mempalace.sources import register
from notes_kg_adapter import NotesAdapter

register("notes-kg", NotesAdapter)
sys.exit(main())
"""


def _mine_command(root: Path) -> list:
    """``mempalace`` with the notes adapter registered: the command line to run ``mine`` with."""
    site = root / "adapter-site"
    site.mkdir()
    (site / "notes_kg_adapter.py").write_text(ADAPTER, encoding="utf-8")
    runner = root / "mempalace_with_notes.py"
    runner.write_text(RUNNER.format(site=str(site)), encoding="utf-8")
    return [sys.executable, str(runner)]


def _run(p: Palace, command: list, notes: str) -> dict:
    """``mempalace --palace P mine NOTES --source notes-kg``: exit code and output."""
    done = subprocess.run(
        [*command, "--palace", str(p.path), "mine", notes, "--source", "notes-kg"],
        env=p.env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return {"rc": done.returncode, "out": done.stdout + done.stderr}


def _drawer_id(source_file: Path, chunk: int) -> str:
    """MemPalace's id for an adapter's drawer (sources/context.py)."""
    return f"{hashlib.sha256(str(source_file).encode('utf-8')).hexdigest()[:24]}_{chunk}"


def _facts(pg_dsn: str, schema: str, palace: Path) -> dict:
    """(subject, predicate, object) -> (source_file, source_drawer_id), from the kg_facts view."""
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            f'SELECT subject, predicate, object, source_file, source_drawer_id FROM "{schema}".kg_facts '
            "WHERE palace = ANY (%s)",
            ([str(palace), os.path.realpath(palace)],),
        ).fetchall()
    return {(s, p, o): (f, d) for s, p, o, f, d in rows}


def _drawers(palace: Path, source_file: Path) -> list:
    drawers, kg = open_drawers(str(palace), create=False)
    try:
        return sorted(drawers.get(where={"source_file": str(source_file)}).ids)
    finally:
        kg.close()


def test_an_items_drawers_and_facts_commit_together(tmp_path, embedding_url, pg_env, pg_dsn, pg_schema):
    p = Palace(tmp_path, "postgres", embedding_url)
    mine = _mine_command(tmp_path)
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "readme.md").write_text("# Notes\n\nWhere the notes adapter files.\n", encoding="utf-8")
    assert p.cli("--backend", "postgres", "mine", str(seed))["rc"] == 0

    notes = tmp_path / "notes"
    notes.mkdir()
    a, b = notes / "a.txt", notes / "b.txt"
    # a: a fact before its first drawer, two drawers, a fact after them, one naming its own evidence
    a0, a1 = _drawer_id(a, 0), _drawer_id(a, 1)
    a.write_text(
        "fact: Alice | works_at | Acme\n\nAlice joined Acme in March.\n\nShe leads the storage team.\n\n"
        f"fact: Alice | lives_in | Lisbon\n\nfact: Alice | leads | Storage | {a1}\n",
        encoding="utf-8",
    )
    # b: a drawer, a fact, then the adapter fails in the middle of the item
    b.write_text("Bob keeps the backups.\n\nfact: Bob | maintains | Backups\n\nboom\n", encoding="utf-8")

    failed = _run(p, mine, str(notes))
    assert failed["rc"] != 0 and "the notes adapter failed in b.txt" in failed["out"], failed["out"]

    assert _drawers(p.path, a) == sorted([a0, a1])
    assert _drawers(p.path, b) == []  # the failed item left nothing: not its drawer ...
    facts = _facts(pg_dsn, pg_schema, p.path)
    assert facts == {  # ... nor its fact; a's facts point at a's first drawer, the early one too
        ("Alice", "works_at", "Acme"): (str(a), a0),
        ("Alice", "lives_in", "Lisbon"): (str(a), a0),
        ("Alice", "leads", "Storage"): (str(a), a1),
    }, facts

    b.write_text("Bob keeps the backups.\n\nfact: Bob | maintains | Backups\n", encoding="utf-8")
    done = _run(p, mine, str(notes))
    assert done["rc"] == 0, done["out"]
    assert _drawers(p.path, b) == [_drawer_id(b, 0)]
    facts = _facts(pg_dsn, pg_schema, p.path)
    assert facts[("Bob", "maintains", "Backups")] == (str(b), _drawer_id(b, 0))
    assert len(facts) == 4  # mined again: a's identical open facts were not duplicated

    with p.mcp() as mcp:  # and the palace answers with them, through MemPalace's own tools
        found = mcp.call("mempalace_search", query="who keeps the backups", limit=3)
        assert any("Bob keeps the backups" in r["text"] for r in found["results"]), found
        assert {f["object"] for f in mcp.call("mempalace_kg_query", entity="Alice")["facts"]} == {
            "Acme",
            "Lisbon",
            "Storage",
        }
