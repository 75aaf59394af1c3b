"""Everything MemPalace does, on a Chroma palace and on a postgres palace built from the same files: the
same answers.

Two palaces are mined by the real ``mempalace`` CLI from one directory of files (real documentation
from Debian's packages, a conversation transcript holding a NUL byte, our own notes), then driven the
same way: CLI commands in subprocesses and every tool of MemPalace's MCP server over JSON-RPC on stdio.
Each answer is made comparable (:func:`palace_pair.comparable`: the palace's own path, timestamps,
durations and generated ids removed) and compared. Every difference must be listed in ``KNOWN`` with
its reason (docs/compatibility.md repeats them); a listed difference that no longer
shows is a failure too, so the list stays exact.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import anyio
import pytest

from palace_pair import MEMPALACE, Palace, comparable, differences
from real_text import files, read

DATA = Path(__file__).resolve().parents[1] / "data" / "corpus"

#: step -> why that step's answer differs on a postgres palace (see docs/compatibility.md).
KNOWN = {
    "cli repair": (
        "`mempalace repair` rebuilds Chroma's HNSW files; MemPalace refuses it for any other backend "
        '("repair is Chroma-only in this release", exit 2). PostgreSQL\'s index needs no repair: '
        "`mempalace-pg doctor` checks it, `REINDEX` rebuilds it."
    ),
    "cli repair-status": (
        "compares Chroma's SQLite and HNSW element counts; MemPalace says it is Chroma-only."
    ),
    "cli migrate": (
        "upgrades a palace written by an older Chroma; MemPalace says it is Chroma-only (`mempalace-pg "
        "migrate` moves a palace between backends)."
    ),
    "cli wake-up": (
        "the transcript's NUL byte: Chroma stores it as U+FFFD, MemPalace's pgvector backend and this "
        "one remove it (as asked), so the token estimate is one lower."
    ),
    "cli compress dry": "the transcript's NUL byte again: one token fewer in its AAAK compression figures.",
    "mcp list_drawers": "the transcript's NUL byte again: its preview holds one more character.",
    "mcp list_drawers after deletes": "the transcript's NUL byte: its preview holds one more character.",
    "cli kg normalize, empty palace": (
        "MemPalace's SQLite graph is a file created by the first fact, so on a new Chroma palace there "
        'is "No knowledge graph" (exit 1); a postgres palace\'s graph always exists in its database and '
        "has 0 facts to normalize."
    ),
}
#: (field path pattern, reason): a field that differs on postgres in any step.
KNOWN_FIELDS = [
    (
        r"^\.sqlite_integrity\b",
        "MemPalace's status checks Chroma's SQLite file; for any other backend it reports checked: false.",
    ),
    (
        r"^\.library_versions\.serving\.chromadb\b",
        "MemPalace's status names the chromadb version only for a palace on Chroma.",
    ),
]


def _transcript() -> str:
    return (
        "# Session log: the build\n\n> user: run the build and show me the tool output\n\n"
        "assistant: here is what the tool printed:\n\n```\nchecking sizes... \x00\x00 ok\n```\n\n"
        "The build succeeded after we pinned postgres to 17 and pgvector to 0.8.\n"
    )


def _team_notes() -> str:
    """People named together often enough for MemPalace's entity detection and hallways."""
    return "\n".join(
        f"## Week {i}\n\nAlice said she would review the backups with Bob. Bob told Alice he had "
        "moved the NAS. She asked him to check the UPS, and Alice and Bob agreed to meet on Friday.\n"
        for i in range(6)
    )


def _conversation() -> str:
    lines = []
    turns = [
        ("user", "Where do the nightly backups of the home server go?"),
        (
            "assistant",
            "pg_dump runs at 02:00 and copies the dump to the NAS; the tool output had a stray \x00 byte.",
        ),
        ("user", "And when the power goes out?"),
        ("assistant", "The UPS keeps the NAS up for twenty minutes, then it shuts down cleanly."),
    ]
    for i, (role, text) in enumerate(turns):
        lines.append(
            json.dumps(
                {
                    "type": role,
                    "uuid": f"00000000-0000-4000-8000-00000000000{i}",
                    "sessionId": "11111111-2222-4333-8444-555555555555",
                    "timestamp": f"2026-03-0{i + 1}T10:00:00Z",
                    "message": {"role": role, "content": text},
                }
            )
        )
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory, embedding_url, pg_dsn, pg_schema):
    """The files, and a Chroma and a postgres palace mined from them by the real CLI."""
    root = tmp_path_factory.mktemp("parity")
    corpus = root / "corpus"
    shutil.copytree(DATA, corpus)
    (corpus / "python").mkdir()
    for path in files("python3.11-doc")[40:43]:
        (corpus / "python" / path.name).write_text(read(path), encoding="utf-8")
    (corpus / "postgres").mkdir()
    for path in files("postgresql-doc-15")[100:102]:
        (corpus / "postgres" / (path.stem + ".txt")).write_text(read(path), encoding="utf-8")
    (corpus / "notes" / "transcript.md").write_text(_transcript(), encoding="utf-8")
    (corpus / "notes" / "team.md").write_text(_team_notes(), encoding="utf-8")
    chats = root / "chats"
    chats.mkdir()
    (chats / "session.jsonl").write_text(_conversation(), encoding="utf-8")
    pristine = root / "pristine"
    pristine.mkdir()
    for d in (corpus, chats):
        shutil.copytree(d, pristine / d.name)
    os.environ["MEMPALACE_PG_DSN"], os.environ["MEMPALACE_PG_SCHEMA"] = pg_dsn, pg_schema
    palaces = {b: Palace(root, b, embedding_url) for b in ("chroma", "postgres")}
    return {
        "root": root,
        "corpus": corpus,
        "chats": chats,
        "pristine": pristine,
        "palaces": palaces,
        "llm": embedding_url,
    }


def _reset_files(world) -> None:
    """The corpus and chats as they were before any palace ran (init and sync write into them)."""
    for d in (world["corpus"], world["chats"]):
        shutil.rmtree(d)
        shutil.copytree(world["pristine"] / d.name, d)


def _cli_steps(world, p: Palace, phase: str) -> list:
    corpus, chats = str(world["corpus"]), str(world["chats"])
    llm = ["--llm-provider", "openai-compat", "--llm-endpoint", world["llm"], "--llm-model", "rules"]
    if phase == "build":
        return [
            ("cli init", [*p.backend_args(), "init", corpus, "--yes", "--no-llm"]),
            ("cli mine", [*p.backend_args(), "mine", corpus]),
            ("cli kg normalize, empty palace", ["kg", "normalize", *llm]),
            ("cli mine again", ["mine", corpus]),
            ("cli mine convos", ["mine", chats, "--mode", "convos", "--wing", "chats"]),
            ("cli sweep", ["sweep", str(Path(chats) / "session.jsonl")]),
            ("cli status", ["status"]),
            ("cli search", ["search", "postgres pinned build"]),
            ("cli search in a wing", ["search", "pathlib path objects", "--wing", "corpus"]),
            ("cli search in a room", ["search", "backups", "--room", "technical"]),
            ("cli search nothing", ["search", "zzzz qqqq"]),
            ("cli wake-up", ["wake-up"]),
            ("cli wake-up wing", ["wake-up", "--wing", "corpus"]),
            ("cli palace set-embedder", ["palace", "set-embedder"]),
            ("cli migrate-wings dry", ["migrate-wings", "--dry-run"]),
            ("cli sync dry", ["sync", corpus, "--dry-run"]),
            ("cli compress dry", ["compress", "--dry-run", "--wing", "corpus"]),
            ("cli repair", ["repair"]),
            ("cli repair-status", ["repair-status"]),
            ("cli migrate", ["migrate", "--dry-run"]),
        ]
    return [
        ("cli audit", ["audit"]),
        ("cli kg normalize", ["kg", "normalize", *llm]),
        ("cli kg normalize --yes", ["kg", "normalize", "--yes"]),
        ("cli audit after normalize", ["audit"]),
        ("cli tunnels propose", ["tunnels", "propose"]),
        ("cli tunnels prune", ["tunnels", "prune"]),
        ("cli hallways", ["hallways"]),
        ("cli hallways --rebuild", ["hallways", "--rebuild"]),
        ("cli hallways after rebuild", ["hallways"]),
        ("cli status after", ["status"]),
        ("cli search after", ["search", "espresso tomatoes basil"]),
    ]


def _mcp_steps(mcp, p: Palace) -> list:
    """Every tool of MemPalace's MCP server, called the same way on both palaces. Returns (step, answer)."""
    out = []

    def call(step, name, **args):
        out.append((step, mcp.call(name, **args)))
        return out[-1][1]

    names = sorted(t["name"] for t in mcp.tools())
    out.append(("mcp tools/list", names))
    for tool in (
        "status",
        "list_wings",
        "get_taxonomy",
        "get_aaak_spec",
        "kg_stats",
        "graph_stats",
        "memories_filed_away",
        "mesh_peers",
        "list_tunnels",
        "list_hallways",
    ):
        call(f"mcp {tool}", f"mempalace_{tool}")
    call("mcp list_rooms", "mempalace_list_rooms")
    call("mcp list_rooms corpus", "mempalace_list_rooms", wing="corpus")
    call("mcp search", "mempalace_search", query="how do I get my data back after the disk dies", limit=5)
    call("mcp search wing", "mempalace_search", query="basil garden", limit=3, wing="corpus")
    union = {"query": "pinned postgres build", "limit": 4, "candidate_strategy": "union"}
    if p.backend == "postgres":
        # union adds the backend's own lexical_search hits: a postgres palace ranks them as Chroma
        # does with lexical = "chroma" (its default is FTS5's BM25, docs/compatibility.md)
        with p.mcp(env={**p.env, "MEMPALACE_PG_LEXICAL": "chroma"}) as as_chroma:
            out.append(("mcp search union", as_chroma.call("mempalace_search", **union)))
    else:
        call("mcp search union", "mempalace_search", **union)
    call(
        "mcp search source_file",
        "mempalace_search",
        query="build",
        limit=3,
        source_file=str(p.root.parent / "corpus" / "notes" / "transcript.md"),
    )
    call(
        "mcp check_duplicate",
        "mempalace_check_duplicate",
        content="The build succeeded after we pinned postgres",
    )
    listed = call("mcp list_drawers", "mempalace_list_drawers", limit=100)  # every drawer of the corpus
    call("mcp list_drawers page", "mempalace_list_drawers", limit=5, offset=10)
    call("mcp list_drawers wing", "mempalace_list_drawers", wing="chats", limit=5)
    # two drawers of our own notes (drawer ids hash the absolute path, so sorted pages vary from run to run)
    first = sorted(
        d["drawer_id"]
        for d in listed.get("drawers", [])
        if isinstance(listed, dict)
        and Path(d["metadata"].get("source_file", "")).name in ("garden.md", "postgres.md")
    )[:2]
    if first:
        call("mcp get_drawer", "mempalace_get_drawer", drawer_id=first[0])
        call("mcp get_drawers", "mempalace_get_drawers", drawer_ids=first)
    added = call(
        "mcp add_drawer",
        "mempalace_add_drawer",
        wing="kitchen",
        room="recipes",
        content="Tomato sauce: simmer tomatoes with basil and garlic for forty minutes.",
    )
    call(
        "mcp add_drawer again",
        "mempalace_add_drawer",
        wing="kitchen",
        room="recipes",
        content="Tomato sauce: simmer tomatoes with basil and garlic for forty minutes.",
    )
    second = call(
        "mcp add_drawer 2",
        "mempalace_add_drawer",
        wing="kitchen",
        room="drinks",
        content="Espresso: 18 grams in, 36 grams out, 28 seconds.",
        source_file="notes/coffee.md",
    )
    drawer = added.get("drawer_id") if isinstance(added, dict) else None
    if drawer:
        call(
            "mcp update_drawer",
            "mempalace_update_drawer",
            drawer_id=drawer,
            content="Tomato sauce: simmer tomatoes with basil, garlic and olive oil for forty minutes.",
        )
        call("mcp get_drawer updated", "mempalace_get_drawer", drawer_id=drawer)
    call(
        "mcp checkpoint",
        "mempalace_checkpoint",
        items=[
            {
                "wing": "kitchen",
                "room": "recipes",
                "content": "Pesto: basil, pine nuts, parmesan, garlic, oil.",
            }
        ],
    )
    call(
        "mcp diary_write",
        "mempalace_diary_write",
        agent_name="tester",
        entry="Parity run wrote its first diary entry.",
    )
    call("mcp diary_read", "mempalace_diary_read", agent_name="tester")
    call(
        "mcp kg_add",
        "mempalace_kg_add",
        subject="Home Server",
        predicate="backs_up_to",
        object="NAS",
        valid_from="2025-01-01",
        source_drawer_id=drawer,
    )
    call("mcp kg_add 2", "mempalace_kg_add", subject="NAS", predicate="powered_by", object="UPS")
    call(
        "mcp kg_add 3",
        "mempalace_kg_add",
        subject="Alice",
        predicate="deployed_commit",
        object="fc81c6f6",
        valid_from="2026-02-01",
    )
    call("mcp kg_add 4", "mempalace_kg_add", subject="Alice", predicate="works_on", object="Home Server")
    call("mcp kg_query", "mempalace_kg_query", entity="NAS")
    call(
        "mcp kg_invalidate",
        "mempalace_kg_invalidate",
        subject="NAS",
        predicate="powered_by",
        object="UPS",
        ended="2026-01-01",
    )
    call(
        "mcp kg_supersede",
        "mempalace_kg_supersede",
        subject="Home Server",
        predicate="backs_up_to",
        old_object="NAS",
        new_object="Offsite Bucket",
        at="2026-02-01",
    )
    call("mcp kg_query as_of", "mempalace_kg_query", entity="Home Server", as_of="2025-06-01")
    call("mcp kg_timeline", "mempalace_kg_timeline")
    call("mcp kg_timeline entity", "mempalace_kg_timeline", entity="Alice", limit=10)
    call("mcp kg_stats after", "mempalace_kg_stats")
    call(
        "mcp create_tunnel",
        "mempalace_create_tunnel",
        source_wing="kitchen",
        source_room="recipes",
        target_wing="corpus",
        target_room="general",
        label="food notes",
    )
    tunnel = call(
        "mcp create_tunnel 2",
        "mempalace_create_tunnel",
        source_wing="chats",
        source_room="technical",
        target_wing="corpus",
        target_room="general",
        label="backups",
    )
    call("mcp list_tunnels after", "mempalace_list_tunnels")
    call("mcp follow_tunnels", "mempalace_follow_tunnels", wing="kitchen", room="recipes")
    call("mcp find_tunnels", "mempalace_find_tunnels")
    call("mcp traverse", "mempalace_traverse", start_room="general", max_hops=2)
    call("mcp graph_stats after", "mempalace_graph_stats")
    call("mcp get_taxonomy after", "mempalace_get_taxonomy")
    call("mcp list_wings after", "mempalace_list_wings")
    call("mcp list_rooms kitchen", "mempalace_list_rooms", wing="kitchen")
    call("mcp status after", "mempalace_status")
    tunnel_id = tunnel.get("tunnel_id") or tunnel.get("id") if isinstance(tunnel, dict) else None
    if tunnel_id:
        call("mcp delete_tunnel", "mempalace_delete_tunnel", tunnel_id=tunnel_id)
    call("mcp delete_hallway", "mempalace_delete_hallway", hallway_id="no-such-hallway")
    call(
        "mcp delete_by_source dry", "mempalace_delete_by_source", source_file="notes/coffee.md", dry_run=True
    )
    call("mcp delete_by_source", "mempalace_delete_by_source", source_file="notes/coffee.md")
    second_id = second.get("drawer_id") if isinstance(second, dict) else None
    call("mcp delete_drawer gone", "mempalace_delete_drawer", drawer_id=second_id or "none")
    if first:
        call("mcp delete_drawers", "mempalace_delete_drawers", drawer_ids=first)
        call("mcp get_drawers deleted", "mempalace_get_drawers", drawer_ids=first)
    # the overview after writes and deletes (a postgres palace answers from its trigger-kept counts and
    # pages in SQL: every kind of write must keep them as Chroma's scans see the drawers)
    call("mcp list_drawers after deletes", "mempalace_list_drawers", limit=100)
    call("mcp list_drawers room", "mempalace_list_drawers", wing="kitchen", room="recipes", limit=3, offset=1)
    call("mcp list_drawers room only", "mempalace_list_drawers", room="general", limit=4)
    call("mcp graph_stats after deletes", "mempalace_graph_stats")
    call("mcp find_tunnels after deletes", "mempalace_find_tunnels")
    call("mcp hook_settings", "mempalace_hook_settings")
    event = call(
        "mcp event_append",
        "mempalace_event_append",
        type="note",
        stream="parity",
        room="general",
        from_agent="tester",
        body="hello from the parity test",
    )
    call("mcp event_list", "mempalace_event_list", stream="parity")
    call("mcp event_wait", "mempalace_event_wait", stream="parity", timeout_ms=10)
    event_id = event.get("event_id") if isinstance(event, dict) else None
    if event_id:
        call("mcp event_ack", "mempalace_event_ack", event_id=event_id, from_agent="tester")
    artifact = call(
        "mcp artifact_put",
        "mempalace_artifact_put",
        kind="text",
        content="artifact body",
        created_by="tester",
    )
    artifact_id = artifact.get("artifact_id") if isinstance(artifact, dict) else None
    if artifact_id:
        call("mcp artifact_get", "mempalace_artifact_get", artifact_id=artifact_id)
    call(
        "mcp task_create",
        "mempalace_task_create",
        project="parity",
        from_agent="tester",
        to_agent="other",
        goal="compare palaces",
        branch="main",
        base_commit="0" * 40,
        done="answers match",
    )
    call(
        "mcp patch_submit",
        "mempalace_patch_submit",
        content="--- a\n+++ b\n",
        from_agent="tester",
        stream="parity",
    )
    call("mcp sync", "mempalace_sync", project_dir=str(p.root.parent / "corpus"))
    call(
        "mcp mine",
        "mempalace_mine",
        source=str(p.root.parent / "chats"),
        mode="convos",
        wing="chats",
        dry_run=True,
    )
    call("mcp reconnect", "mempalace_reconnect")
    call("mcp status end", "mempalace_status")
    call("mcp search end", "mempalace_search", query="tomato basil pesto", limit=5)
    return out


def _run(world, p: Palace) -> list:
    _reset_files(world)
    steps = []
    for step, args in _cli_steps(world, p, "build"):
        steps.append((step, p.cli(*args)))
    with p.mcp() as mcp:
        steps += _mcp_steps(mcp, p)
    for step, args in _cli_steps(world, p, "maintain"):
        steps.append((step, p.cli(*args)))
    return steps


@pytest.fixture(scope="module")
def answers(world):
    out = {}
    for backend, p in world["palaces"].items():
        out[backend] = [(step, comparable(value, p)) for step, value in _run(world, p)]
    return out


def test_every_command_and_tool_answers_as_on_chroma(answers):
    chroma, postgres = dict(answers["chroma"]), dict(answers["postgres"])
    assert [s for s, _ in answers["chroma"]] == [s for s, _ in answers["postgres"]]
    unexpected, vanished, fields_seen = {}, [], set()
    for step in chroma:
        diff = differences(chroma[step], postgres[step])
        for pattern, _ in KNOWN_FIELDS:
            fields_seen.update(pattern for d in diff if re.match(pattern, d))
            diff = [d for d in diff if not re.match(pattern, d)]
        if diff and step not in KNOWN:
            unexpected[step] = diff
        if not diff and step in KNOWN:
            vanished.append(step)
    vanished += [p for p, _ in KNOWN_FIELDS if p not in fields_seen]
    report = "\n".join(
        f"{step}:\n    " + "\n    ".join(d[:300] for d in diff[:6]) for step, diff in unexpected.items()
    )
    if os.environ.get("PARITY_REPORT"):  # the whole comparison, for a person reading it
        Path(os.environ["PARITY_REPORT"]).write_text(
            report + "\n\n" + json.dumps(answers, indent=1, default=str)
        )
    assert not unexpected, f"{len(unexpected)} steps answer differently on postgres:\n{report}"
    assert not vanished, f"listed as different but now the same (remove them from KNOWN): {vanished}"


def test_the_answers_are_real_work(answers):
    """The comparison is worth something: the palaces were mined and the tools answered."""
    postgres = dict(answers["postgres"])
    assert postgres["cli mine"]["rc"] == 0 and "Drawers filed: 0" not in postgres["cli mine"]["out"]
    assert len(postgres["mcp tools/list"]) >= 45
    assert postgres["mcp search"]["results"]
    assert postgres["mcp kg_query"]["count"] >= 1
    assert postgres["cli audit"]["rc"] == 0 and "knowledge graph" in postgres["cli audit"]["out"]
    assert "Rewrote 2 fact(s)" in postgres["cli kg normalize --yes"]["out"]
    assert "hallway(s)" in postgres["cli hallways after rebuild"]["out"]


def test_a_file_name_that_is_not_utf8_stops_mine_as_on_chroma(tmp_path, embedding_url, pg_dsn, pg_schema):
    """MemPalace 3.11 itself cannot mine a file whose name is not valid UTF-8: its mine lock hashes
    ``source_file.encode()`` (mempalace/palace/mine_lock.py) before any backend is reached, so the run
    stops on Chroma and on postgres alike, with the same message. (The backend stores such paths: see
    test_hostile_input.)"""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "transcript.md").write_text(_transcript(), encoding="utf-8")
    fd = os.open(bytes(corpus) + b"/caf\xe9-menu.md", os.O_WRONLY | os.O_CREAT)
    os.write(fd, "# Café menu\n\nEspresso and a croissant at the café near the station.\n".encode())
    os.close(fd)
    os.environ["MEMPALACE_PG_DSN"], os.environ["MEMPALACE_PG_SCHEMA"] = pg_dsn, pg_schema
    runs = {}
    for backend in ("chroma", "postgres"):
        p = Palace(tmp_path, backend, embedding_url)
        runs[backend] = comparable(p.cli(*p.backend_args(), "mine", str(corpus)), p)
    assert runs["chroma"] == runs["postgres"]
    assert runs["postgres"]["rc"] == 1
    assert "UnicodeEncodeError" in runs["postgres"]["out"] and "mine_lock" in runs["postgres"]["out"]


# -- init, then serve, from a new configuration directory ------------------------------------------


@contextlib.contextmanager
def _served(p: Palace, env: dict):
    """``mempalace --palace P serve`` (the global ``--palace``, as MemPalace's docs put it first) on a free
    loopback port with a token, as a process of its own; yields (url, token, banner) once it answers
    its health check, and stops it afterwards. The banner is what serve printed before it started the
    server (its ``palace   :`` line names the palace it serves)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    out, err = p.root / f"serve-{port}.out", p.root / f"serve-{port}.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen(
            [MEMPALACE, "--palace", str(p.path), "serve", "--host", "127.0.0.1", "--port", str(port)]
            + ["--token", token],
            env=env,
            stdout=stdout,
            stderr=stderr,
        )
    try:
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise AssertionError(
                        f"mempalace serve did not start: {err.read_text()[-3000:]}"
                    ) from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp", token, out.read_text()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _served_palace(banner: str) -> str:
    return re.search(r"^\s*palace\s*:\s*(.+)$", banner, re.M).group(1).strip()


def _over_http(url: str, token: str, calls: list) -> list:
    """(step, answer) of each (step, tool, arguments) in ``calls``, over MemPalace's HTTP MCP server, as a
    client of the team server calls them."""
    from mcp_client import http_session, text_of

    async def session():
        got = []
        async with http_session(url, token) as client:
            for step, name, arguments in calls:
                result = await client.result(name, **arguments)
                text = text_of(result)
                try:
                    answer = json.loads(text)
                except ValueError:
                    answer = text
                got.append((step, {"isError": answer} if result.is_error else answer))
        return got

    return anyio.run(session)


SAUCE = "Tomato sauce: simmer tomatoes with basil and garlic for forty minutes."
#: what a client of the team server does first on a palace that was only init'ed
FIRST_CALLS = [
    ("add_drawer", "mempalace_add_drawer", {"wing": "kitchen", "room": "recipes", "content": SAUCE}),
    ("status", "mempalace_status", {}),
    ("search", "mempalace_search", {"query": "tomato basil sauce", "limit": 3}),
    ("kg_add", "mempalace_kg_add", {"subject": "Sauce", "predicate": "uses", "object": "Basil"}),
    ("kg_query", "mempalace_kg_query", {"entity": "Sauce"}),
]


def _init_serve_mine_serve(p: Palace) -> tuple:
    """init from a new configuration directory, serve (written to and searched over HTTP), mine with no
    ``--backend``, then serve from a configuration naming no palace; (config.json, the first server's
    answers, the palace the second server served, that server's status)."""
    corpus = p.root / "corpus"
    shutil.copytree(DATA, corpus)
    assert not any(p.config.iterdir())  # a configuration directory nobody has written yet
    done = p.cli(*p.backend_args(), "init", str(corpus), "--yes", "--no-llm")
    assert done["rc"] == 0, done["out"]
    config = json.loads((p.config / "config.json").read_text())

    with _served(p, p.env) as (url, token, banner):
        assert _served_palace(banner) == str(p.path), banner
        first = _over_http(url, token, FIRST_CALLS)

    done = p.cli("mine", str(corpus))  # no --backend: config.json's palace_path and backend decide
    assert done["rc"] == 0 and "Drawers filed: 0" not in done["out"], done["out"]
    on_disk = {f.name for f in p.path.iterdir()}
    assert ("mempalace_pg.json" if p.backend == "postgres" else "chroma.sqlite3") in on_disk, on_disk
    assert p.backend == "chroma" or "chroma.sqlite3" not in on_disk, on_disk

    elsewhere = p.root / "other-config"
    elsewhere.mkdir()
    with _served(p, {**p.env, "MEMPALACE_CONFIG_DIR": str(elsewhere)}) as (url, token, banner):
        ((_, status),) = _over_http(url, token, [("status", "mempalace_status", {})])
    return config, first, _served_palace(banner).replace(str(elsewhere), "<other config>"), status


def test_init_then_serve_from_a_new_configuration_as_on_chroma(tmp_path, embedding_url):
    """The way MemPalace's docs set up a team server: ``mempalace [--backend postgres] --palace P init
    <dir>`` from a configuration directory that does not exist yet, then ``mempalace --palace P serve``.

    MemPalace 3.11 drops two things on the way: with ``--backend``, init's ``set_backend`` writes
    ``{"backend": ...}`` over the config.json init has just written (palace_path, collection_name,
    topic_wings, hall_keywords), and ``serve`` ignores the global ``--palace`` (its own ``--palace``
    defaults to None over it) and serves config.json's palace_path. On Chroma the second is hidden by
    the config.json init kept; for a postgres palace :mod:`mempalace_pg.hooks` keeps that config.json
    and serves the ``--palace`` given. From a configuration that names no palace MemPalace still serves
    config.json's palace for Chroma; the hooks serve P for postgres."""
    palaces = {b: Palace(tmp_path, b, embedding_url) for b in ("chroma", "postgres")}
    runs = {b: _init_serve_mine_serve(p) for b, p in palaces.items()}
    configs = {b: run[0] for b, run in runs.items()}
    assert set(configs["chroma"]) == {"palace_path", "collection_name", "topic_wings", "hall_keywords"}
    assert set(configs["postgres"]) == set(configs["chroma"]) | {"backend"}
    assert configs["postgres"].pop("backend") == "postgres"
    for backend, config in configs.items():
        assert config.pop("palace_path") == str(palaces[backend].path), config
    assert configs["postgres"] == configs["chroma"]  # MemPalace's defaults, the same

    first = {b: [(step, comparable(a, palaces[b])) for step, a in run[1]] for b, run in runs.items()}
    assert [s for s, _ in first["chroma"]] == [s for s, _ in first["postgres"]]
    unexpected = {}
    for (step, chroma), (_, postgres) in zip(first["chroma"], first["postgres"]):
        diff = [d for d in differences(chroma, postgres) if not any(re.match(k, d) for k, _ in KNOWN_FIELDS)]
        if diff:
            unexpected[step] = diff
    assert not unexpected, unexpected
    status = dict(runs["postgres"][1])["status"]
    assert status["total_drawers"] == 1 and status["wings"] == {"kitchen": 1}, status
    assert dict(runs["postgres"][1])["search"]["results"][0]["text"] == SAUCE

    # served from a configuration naming no palace: MemPalace serves its default palace for Chroma
    assert runs["chroma"][2] == "<other config>/palace"
    assert runs["postgres"][2] == str(palaces["postgres"].path)
    assert runs["postgres"][3]["total_drawers"] > 1 and "kitchen" in runs["postgres"][3]["wings"]
