"""Benchmark: does graph-aware recall help? MemPalace's ``mempalace_search`` against this plugin's
``pg_search_around_entity`` and ``pg_hybrid_search``, all through real MCP clients, on one palace.

    python benchmarks/bench_mcp_recall.py                    # writes RESULTS.md and out/bench_mcp_recall.json
    python benchmarks/bench_mcp_recall.py --no-write --reps 1 --distractor-files 20   # quick look

The palace (set up from scratch in a temporary directory and a schema of its own, dropped at the end):

1. ``benchmarks/data/multihop/corpus/``: 55 short notes of a small team's memory (people, projects,
   places, decisions, meetings, admin: one folder, so one room, each), plus distractor real text from
   Debian's python3.11-doc and postgresql-doc-15 (``--distractor-files`` files of each, the first
   ``--distractor-chars`` characters of every k-th file in sorted order), mined by the real CLI
   (``mempalace init --backend postgres --yes --no-llm`` then ``mempalace mine``) with real
   all-MiniLM-L6-v2 embeddings (scripts/embedding_server.py, MemPalace's ``openai-compat`` setting);
2. ``facts.json``: facts added through MemPalace's own MCP tool ``mempalace_kg_add`` on MemPalace's
   own server, each with ``source_drawer_id`` = the drawer of the note that states it;
3. ``questions.json``: questions that each name an entity E. ``multi-hop``: the note holding the
   answer never names E and is linked to it only through the graph (E -fact-> F, and the note is the
   evidence of a fact about F); ``1-hop``: the note is the evidence of a fact about E itself and names
   it. Both properties are checked on the data before anything runs.

Then, per question, through the ``mcp`` SDK's ``ClientSession`` over ``stdio_client`` (one long-lived
session per server, a warm-up call per tool first, the four calls of a question one after the other):
``mempalace_search(query, limit=5)`` on ``python -m mempalace.mcp_server``, and on ``mempalace-pg mcp``
``pg_search_around_entity(entity=E, query, hops=2, limit=5)`` in ``restrict``, ``boost`` and ``fuse`` mode and
``pg_hybrid_search(query, limit=5)``. Metric: recall@5 of the answer note (a hit when any of the five
results is a drawer of that note's file), from the first round; p50/p95 ms per call at the client over
all ``--reps`` rounds. The graph-aware tool is given E; the others only the question.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import anyio
import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
import bench_mine as bm  # noqa: E402
import common  # noqa: E402

from mempalace_pg.retrieval import DEFAULT_BOOST  # noqa: E402

from mcp_client import mempalace_server, pg_server, stdio_session, text_of  # noqa: E402

DATA = HERE / "data" / "multihop"
NOTES = DATA / "corpus"
#: A note longer than MemPalace's chunk size would be mined into several drawers.
NOTE_MAX_CHARS = 800
HOPS = 2
LIMIT = 5
MODEL = "all-MiniLM-L6-v2"
#: Debian packages whose text is mixed in as distractors (tests/real_text.py reads them).
DISTRACTORS = ("python3.11-doc", "postgresql-doc-15")
WARMUP = {"question": "What did we agree at the last weekly meeting?", "entity": "Tomás Reyes"}


def around(mode: str, **extra):
    """pg_search_around_entity's call for a question in ``mode`` (restrict, the tool's default, or one
    that ranks every drawer), with ``extra`` arguments."""
    extra = extra if mode == "restrict" else {"mode": mode, **extra}
    return (
        "pg",
        "pg_search_around_entity",
        lambda q: {"entity": q["entity"], "query": q["question"], "hops": HOPS, "limit": LIMIT, **extra},
    )


#: label -> (server, tool, arguments for a question)
CALLS = {
    "mempalace_search": ("mempalace", "mempalace_search", lambda q: {"query": q["question"], "limit": LIMIT}),
    **{f"around_entity {mode}": around(mode) for mode in ("restrict", "boost", "fuse")},
    # the tool as it ranked before it took the entity's name out of the query
    "around_entity restrict, name kept": around("restrict", keep_entity_in_query=True),
    "pg_hybrid_search": ("pg", "pg_hybrid_search", lambda q: {"query": q["question"], "limit": LIMIT}),
}


# ----------------------------------------------------------------------------- the data, checked
def load_data() -> tuple[list[dict], list[dict]]:
    facts = json.loads((DATA / "facts.json").read_text())
    questions = json.loads((DATA / "questions.json").read_text())
    return facts, questions


def evidence_depth(facts: list[dict], entity: str, note: str) -> int | None:
    """How many hops from ``entity`` the walk of ``pg_search_around_entity`` first reaches a fact whose
    evidence is ``note`` (1: a fact touching the entity; 2: a fact touching a neighbour), or None."""
    key = entity.casefold()
    frontier, seen = {key}, {key}
    for depth in range(1, HOPS + 1):
        touching = [f for f in facts if {f["subject"].casefold(), f["object"].casefold()} & frontier]
        if any(f["source_file"] == note for f in touching):
            return depth
        nxt = {n for f in touching for n in (f["subject"].casefold(), f["object"].casefold())} - seen
        seen |= nxt
        frontier = nxt
    return None


def check_data(facts: list[dict], questions: list[dict]) -> None:
    """Fail unless every note is one drawer, every fact's note exists, and every question is what its
    type says: a multi-hop answer note never names the entity and is reached at hop 2, a 1-hop one
    names it and is reached at hop 1."""
    problems = []
    for note in sorted(NOTES.rglob("*.md")):
        if len(note.read_text()) > NOTE_MAX_CHARS:
            problems.append(f"{note.relative_to(NOTES)} is over {NOTE_MAX_CHARS} characters")
    for f in facts:
        if not (NOTES / f["source_file"]).is_file():
            problems.append(f"fact {f['subject']} {f['predicate']}: no note {f['source_file']}")
    for q in questions:
        named = names(q, q["answer_file"])
        depth = evidence_depth(facts, q["entity"], q["answer_file"])
        want = (False, 2) if q["type"] == "multi-hop" else (True, 1)
        if (named, depth) != want:
            problems.append(f"{q['id']} ({q['type']}): names the entity={named}, reached at hop {depth}")
    if problems:
        raise SystemExit("benchmark data is inconsistent:\n  " + "\n  ".join(problems))


# ----------------------------------------------------------------------------- the palace
def distractor_files(per_package: int) -> list[tuple[str, Path]]:
    """(package, file): every k-th documentation file of each package, ``per_package`` of them."""
    from real_text import SOURCES

    out = []
    for package in DISTRACTORS:
        root, pattern = SOURCES[package]
        found = sorted(root.rglob(pattern)) if root.is_dir() else []
        if not found:
            raise SystemExit(f"install Debian's {package}: bash scripts/real-text.sh {package}")
        step = max(1, len(found) // per_package)
        out += [(package, p) for p in found[::step][:per_package]]
    return out


def build_corpus(dest: Path, per_package: int, chars: int) -> dict:
    """The notes, plus the distractors as plain text under reading/<package>/; counts of each."""
    from real_text import SOURCES, chunks, read

    shutil.copytree(NOTES, dest)
    n = 0
    for package, path in distractor_files(per_package):
        root = SOURCES[package][0]
        text, pieces = "", chunks(read(path), 700)
        while pieces and len(text) + len(pieces[0]) <= chars:
            text += pieces.pop(0) + "\n\n"
        name = str(path.relative_to(root)).replace("/", "_").removesuffix(".rst.txt").removesuffix(".html")
        target = dest / "reading" / package / f"{name}.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text or read(path)[:chars])
        n += 1
    return {"notes": len(list(NOTES.rglob("*.md"))), "distractor_files": n}


def drawers_by_file(dsn: str, schema: str, corpus: Path) -> dict[str, list[str]]:
    """source file (relative to the corpus) -> its drawer ids, first chunk first, read in SQL."""
    import psycopg
    from psycopg import sql

    out: dict[str, list[str]] = {}
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT metadata->>'source_file', id FROM {} "
                "WHERE collection = 'mempalace_drawers' "
                "ORDER BY metadata->>'source_file', (metadata->>'chunk_index')::int, id"
            ).format(sql.Identifier(schema, "drawers"))
        ).fetchall()
    for source, drawer_id in rows:
        out.setdefault(relative(source, corpus), []).append(drawer_id)
    return out


def relative(source: str, corpus: Path) -> str:
    return str(Path(source).resolve().relative_to(corpus.resolve()))


def drop_palace(dsn: str, schema: str) -> None:
    """Drop this run's schema and graph, and nothing else (the server is shared)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '60s'")
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        conn.execute(
            "SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph WHERE name = %s",
            (f"{schema}_kg",),
        )


# ----------------------------------------------------------------------------- the MCP calls
async def add_facts(palace: bm.Palace, facts: list[dict], evidence) -> float:
    """Every fact through MemPalace's own ``mempalace_kg_add``, ``evidence(fact)`` its source drawer;
    the seconds it took."""
    t0 = time.perf_counter()
    async with stdio_session(mempalace_server(palace.path), palace.env) as mp:
        for f in facts:
            args = {k: f[k] for k in ("subject", "predicate", "object", "valid_from", "valid_to") if k in f}
            added = await mp.call("mempalace_kg_add", **args, source_drawer_id=evidence(f))
            if added.get("success") is not True:
                raise RuntimeError(f"mempalace_kg_add {args}: {added}")
    return time.perf_counter() - t0


def ranked(tool: str, answer: dict, file_of: dict) -> dict:
    """A tool's results in rank order: their corpus files and scores (MemPalace's results are matched by
    drawer id, else by their ``source_path``, in case the id it shows is not the stored one)."""
    if tool == "mempalace_search":
        rows = answer.get("results", [])
        files = [file_of.get(r.get("drawer_id")) or file_of.get(r.get("source_path"), "?") for r in rows]
        return {
            "files": files,
            "similarity": [r.get("similarity") for r in rows],
            # MemPalace ranks by distance minus a closet boost, not by similarity alone
            "closet_boost": [r.get("closet_boost") for r in rows],
            "effective_distance": [r.get("effective_distance") for r in rows],
        }
    if tool == "pg_search_around_entity":
        rows = answer.get("hits", [])
        return {
            "files": [file_of.get(r["id"], "?") for r in rows],
            "similarity": [round(r["similarity"], 3) for r in rows],
            "score": [round(r["score"], 3) for r in rows],
            "evidence": [r["evidence"] for r in rows],
            **{k: answer[k] for k in ("entity_found", "entities", "facts", "evidence_drawers")},
        }
    rows = answer.get("results", [])
    return {"files": [file_of.get(r["id"], "?") for r in rows], "score": [r.get("score") for r in rows]}


async def call_tool(session, tool: str, args: dict) -> tuple[float, dict]:
    t0 = time.perf_counter()
    result = await session.result(tool, **args)
    ms = (time.perf_counter() - t0) * 1000
    if result.is_error:
        raise RuntimeError(f"{tool}({args}) failed: {text_of(result)[:1000]}")
    answer = result.structured_content
    return ms, answer if answer is not None else json.loads(text_of(result))


async def ask_all(palace: bm.Palace, url: str, questions: list[dict], file_of: dict, reps: int) -> dict:
    """Every question to every tool, ``reps`` rounds, one session per server; per label the latencies
    and, per question, the first round's ranked files (and the neighbourhood's size). Then, once per
    question, ``pg_entities_for_query``'s top entities."""
    out: dict = {label: {"ms": [], "answers": {}} for label in CALLS}
    out["embed_ms"], out["entities_for_query"] = [], {}
    async with (
        stdio_session(mempalace_server(palace.path), palace.env) as mp,
        stdio_session(pg_server(palace.path), palace.env) as pg,
    ):
        sessions = {"mempalace": mp, "pg": pg}
        for server, tool, arguments in CALLS.values():  # warm-up: not measured
            await call_tool(sessions[server], tool, arguments(WARMUP))
        for rep in range(reps):
            for q in questions:
                for label, (server, tool, arguments) in CALLS.items():
                    ms, answer = await call_tool(sessions[server], tool, arguments(q))
                    out[label]["ms"].append(ms)
                    if rep == 0:
                        out[label]["answers"][q["id"]] = ranked(tool, answer, file_of)
                t0 = time.perf_counter()  # what embedding the question alone costs, for comparison
                bm.embed(url, [q["question"]])
                out["embed_ms"].append((time.perf_counter() - t0) * 1000)
        for q in questions:  # could the plugin's own tool name the entity an AI has to pass?
            _, answer = await call_tool(pg, "pg_entities_for_query", {"query": q["question"], "limit": LIMIT})
            out["entities_for_query"][q["id"]] = [e["name"] for e in answer["entities"]]
    return out


# ----------------------------------------------------------------------------- the figures
def score(questions: list[dict], asked: dict) -> dict:
    """Per label and question type: recall@5, recall@1, latencies; per question, the rank of the hit."""
    per_question = {q["id"]: {**q, "tools": {}} for q in questions}
    summary: dict = {}
    for label in CALLS:
        got = asked[label]
        rows: dict = {"all": [], "multi-hop": [], "1-hop": []}
        for q in questions:
            files = got["answers"][q["id"]]["files"]
            rank = next((i + 1 for i, f in enumerate(files) if f == q["answer_file"]), None)
            per_question[q["id"]]["tools"][label] = {**got["answers"][q["id"]], "rank": rank}
            for key in ("all", q["type"]):
                rows[key].append(rank)
        summary[label] = {
            key: {
                "n": len(ranks),
                "recall_at_5": sum(r is not None for r in ranks) / len(ranks),
                "recall_at_1": sum(r == 1 for r in ranks) / len(ranks),
            }
            for key, ranks in rows.items()
            if ranks
        }
        summary[label]["latency_ms"] = {
            **common.summary(got["ms"]),
            "all": [round(ms, 2) for ms in got["ms"]],
        }
        results = [f for q in questions for f in got["answers"][q["id"]]["files"]]
        summary[label]["distractor_share"] = sum(f.startswith("reading/") for f in results) / len(results)
    for q in questions:
        per_question[q["id"]]["entities_for_query"] = asked["entities_for_query"][q["id"]]
    summary["embed_ms"] = common.summary(asked["embed_ms"])
    restrict = [per_question[q["id"]]["tools"]["around_entity restrict"] for q in questions]
    sizes = [t["evidence_drawers"] for t in restrict]
    summary["neighbourhood"] = {
        "evidence_drawers_median": float(np.median(sizes)),
        "evidence_drawers_min": int(min(sizes)),
        "evidence_drawers_max": int(max(sizes)),
        # recall@5 of picking 5 of the neighbourhood's drawers at random (the answer is always among them)
        "chance_recall_at_5": float(np.mean([min(1.0, LIMIT / n) if n else 0.0 for n in sizes])),
        "entity_found": sum(bool(t["entity_found"]) for t in restrict),
    }
    summary["findings"] = findings(list(per_question.values()))
    return {"summary": summary, "questions": per_question}


def names(question: dict, note: str) -> bool:
    """Whether a corpus note names the question's entity (distractors never do)."""
    path = NOTES / note
    text = path.read_text() if note.endswith(".md") and path.is_file() else ""
    return any(re.search(rf"\b{re.escape(n)}\b", text, re.IGNORECASE) for n in question["names"])


# Long because each finding is one list built inline; split, they would each need the same helpers.
def findings(rows: list[dict]) -> dict:
    """Which questions one tool answered and another missed, and why boost missed what restrict found."""

    def hit(row, label):
        return row["tools"][label]["rank"] is not None

    multi = [r for r in rows if r["type"] == "multi-hop"]
    out = {
        "search_missed": [r["id"] for r in multi if not hit(r, "mempalace_search")],
        "restrict_not_search": [
            r["id"] for r in multi if hit(r, "around_entity restrict") and not hit(r, "mempalace_search")
        ],
        "search_not_restrict": [
            r["id"] for r in multi if hit(r, "mempalace_search") and not hit(r, "around_entity restrict")
        ],
        "hybrid_not_search": [
            r["id"] for r in multi if hit(r, "pg_hybrid_search") and not hit(r, "mempalace_search")
        ],
        "search_not_hybrid": [
            r["id"] for r in multi if hit(r, "mempalace_search") and not hit(r, "pg_hybrid_search")
        ],
        "entity_in_entities_for_query": sum(r["entity"] in r["entities_for_query"] for r in rows),
        "entity_first_in_entities_for_query": sum(r["entities_for_query"][:1] == [r["entity"]] for r in rows),
        # multi-hop questions whose first result is a note naming the entity (never the answer there)
        "first_names_entity": {
            label: sum(
                bool(r["tools"][label]["files"]) and names(r, r["tools"][label]["files"][0]) for r in multi
            )
            for label in CALLS
        },
        "boost_misses": [],
        # pg_hybrid_search answers whose first two fused scores are equal (the order is then by drawer id)
        "hybrid_top_ties": [
            r["id"]
            for r in rows
            if len(r["tools"]["pg_hybrid_search"]["score"]) > 1
            and r["tools"]["pg_hybrid_search"]["score"][0] == r["tools"]["pg_hybrid_search"]["score"][1]
        ],
        # mempalace_search misses whose answer is more similar to the question (restrict's similarity:
        # the same vectors) than a result mempalace_search returned: its closet boost ranked that one up
        "search_reordered": [],
    }
    for r in multi:
        search, restrict = r["tools"]["mempalace_search"], r["tools"]["around_entity restrict"]
        if search["rank"] is None and restrict["rank"] is not None and search["similarity"]:
            answer = restrict["similarity"][restrict["rank"] - 1]
            weakest = min(search["similarity"])
            if answer > weakest:
                out["search_reordered"].append(
                    {"id": r["id"], "answer_similarity": answer, "weakest": weakest}
                )
    for r in rows:
        restrict, boost = r["tools"]["around_entity restrict"], r["tools"]["around_entity boost"]
        if restrict["rank"] is not None and boost["rank"] is None:
            similarity = restrict["similarity"][restrict["rank"] - 1]
            out["boost_misses"].append(
                {
                    "id": r["id"],
                    "answer_similarity": similarity,
                    "answer_boosted": round(similarity + DEFAULT_BOOST, 3),
                    "fifth_score": boost["score"][-1],
                    "fifth_is_evidence": boost["evidence"][-1],
                }
            )
    return out


# Long because it is the report's text, sentence by sentence, each beside the figures it states.
def render(result: dict, meta: dict) -> str:
    s, nb = result["summary"], result["summary"]["neighbourhood"]
    counts = {t: s["mempalace_search"][t]["n"] for t in ("multi-hop", "1-hop")}
    lines = [
        f"## Does graph-aware recall help? MCP tools on a mined palace ({meta['date']})",
        "",
        f"Command: `{meta['command']}`. {meta['versions']}. The palace: {meta['corpus']['notes']} notes of a "
        f"small team's memory (`benchmarks/data/multihop/corpus/`) and {meta['corpus']['distractor_files']} "
        f"files of Debian's {' and '.join(DISTRACTORS)} as distractors, {meta['drawers']:,} drawers, "
        f"mined by the real `mempalace` CLI with all-MiniLM-L6-v2 ({meta['mine_s']:.0f} s); "
        f"{meta['facts']} facts added through MemPalace's `mempalace_kg_add` over MCP, each naming the "
        f"drawer it was drawn from. {counts['multi-hop']} multi-hop questions (the note with the answer "
        f"never names the question's entity; a fact about the entity leads to a neighbour, and the note "
        f"is the evidence of a fact about that neighbour) and {counts['1-hop']} 1-hop ones (the note "
        f"names the entity and states a fact about it). Every call through the `mcp` SDK's "
        f"`ClientSession` over `stdio_client`, one session per server, warmed up; recall@5 (@1) of the "
        f"answer note from the first of {meta['reps']} rounds, latency p50 / p95 at the client over all "
        "rounds.",
        "",
        "| tool (server) | given | multi-hop recall@5 (@1) | 1-hop recall@5 (@1) | all recall@5 (@1) "
        "| p50 / p95 ms |",
        "|---|---|---|---|---|---|",
    ]
    given = {
        "mempalace_search": ("`mempalace_search` (MemPalace)", "question"),
        "around_entity restrict": (
            "`pg_search_around_entity` hops=2, restrict (mempalace-pg)",
            "question + entity",
        ),
        "around_entity boost": (
            "`pg_search_around_entity` hops=2, boost (mempalace-pg)",
            "question + entity",
        ),
        "around_entity fuse": (
            "`pg_search_around_entity` hops=2, fuse (mempalace-pg)",
            "question + entity",
        ),
        "around_entity restrict, name kept": (
            "`pg_search_around_entity` hops=2, restrict, `keep_entity_in_query` (mempalace-pg)",
            "question + entity",
        ),
        "pg_hybrid_search": ("`pg_hybrid_search` (mempalace-pg)", "question"),
    }
    for label in CALLS:
        r = s[label]
        cells = [
            f"{r[t]['recall_at_5']:.2f} ({r[t]['recall_at_1']:.2f})" for t in ("multi-hop", "1-hop", "all")
        ]
        lat = r["latency_ms"]
        lines.append(
            f"| {given[label][0]} | {given[label][1]} | "
            + " | ".join(cells)
            + f" | {lat['p50']:.1f} / {lat['p95']:.1f} |"
        )
    f = s["findings"]
    n_multi, n_all = counts["multi-hop"], counts["multi-hop"] + counts["1-hop"]
    misses = "; ".join(
        f"{m['id']}: answer similarity {m['answer_similarity']:.2f} + {DEFAULT_BOOST} = "
        f"{m['answer_boosted']:.2f}, below the fifth result's {m['fifth_score']:.2f}"
        + ("" if m["fifth_is_evidence"] else " (not evidence)")
        for m in f["boost_misses"]
    )
    share = ", ".join(f"{label} {s[label]['distractor_share']:.0%}" for label in CALLS)
    lines += [
        "",
        "What the table does not say by itself:",
        "",
        "- **The graph-aware tool is given more.** `pg_search_around_entity` gets the entity's name as the "
        "graph spells it; `mempalace_search` and `pg_hybrid_search` get only the question. In use, the AI "
        "has to pull the name out of the question (here every question writes it out in full) or find it: "
        f"`pg_entities_for_query(question, limit=5)` had the entity among its five for "
        f"{f['entity_in_entities_for_query']} of {n_all} questions, first for "
        f"{f['entity_first_in_entities_for_query']} (entities the question names come first).",
        "- **restrict cannot miss the neighbourhood, by construction.** Its candidates are the drawers that "
        "are the evidence of a fact within 2 hops of the entity, and the questions were written so that "
        "the answer note is one of them: its recall measures ranking inside that set, median "
        f"{nb['evidence_drawers_median']:.0f} drawers (from {nb['evidence_drawers_min']} to "
        f"{nb['evidence_drawers_max']}), where five picked at random would reach recall "
        f"{nb['chance_recall_at_5']:.2f}. It helps only as far as the palace's facts were filed with the "
        "drawer they came from (`source_drawer_id`), as here for every fact.",
        f"- Multi-hop, question by question: `mempalace_search` missed {len(f['search_missed'])} of the "
        f"{n_multi} answers ({', '.join(f['search_missed']) or '-'}); restrict found "
        f"{len(f['restrict_not_search'])} of those and missed {len(f['search_not_restrict'])} that "
        f"`mempalace_search` found. `pg_hybrid_search` found {len(f['hybrid_not_search'])} that "
        f"`mempalace_search` missed, and missed {len(f['search_not_hybrid'])} that it found.",
        "- On multi-hop questions the first result is often a note that names the entity (the question "
        "names it too), never the answer there: "
        + ", ".join(f"{label} {f['first_names_entity'][label]} of {n_multi}" for label in CALLS)
        + ". `pg_search_around_entity` ranks by the question with the entity's name taken out (the entity "
        "has chosen the neighbourhood already) unless `keep_entity_in_query` is set; on 1-hop questions, "
        "whose answer note is about the entity itself, that costs recall@1 (the name-kept row).",
        "- `mempalace_search` does not rank by similarity alone: it takes the 20 nearest drawers, ranks "
        "them by distance minus a boost from MemPalace's closets (0.04-0.40 by the closet's rank), then "
        "re-ranks by 0.6 similarity + 0.4 BM25 over the question's words. In "
        f"{len(f['search_reordered'])} of its "
        f"{len(f['search_missed'])} multi-hop misses the answer note was more similar to the question "
        "than a result it returned ("
        + (
            "; ".join(
                f"{m['id']}: {m['answer_similarity']:.3f} against {m['weakest']:.3f}"
                for m in f["search_reordered"]
            )
            or "-"
        )
        + ").",
        "- boost adds a fixed "
        f"{DEFAULT_BOOST} to the similarity of evidence drawers; where restrict found the answer and boost "
        f"did not: {misses or 'none'}.",
        f"- `pg_hybrid_search`: in {len(f['hybrid_top_ties'])} of {n_all} answers the first two fused "
        "scores were equal (one drawer first by vector and second by text, the other the reverse, "
        "and equal weights); the nearer vector goes first (until commit 2d77a1c the drawer id decided, which "
        "MemPalace derives from the mined file's path, so recall@1 changed from one run to the next).",
        "- A small palace, a friendly one: the notes are few and on few topics, and the distractor "
        f"documentation is mostly off-topic (share of the top-5 results that were distractors: {share}). "
        "The notes, the facts and the questions were written by one author for this benchmark; the "
        "questions were fixed before the first run. A hit is a drawer of the one answer note; a note "
        "that answers in part counts as a miss.",
        f"- Latency includes embedding the question (MiniLM, CPU, same server for both sides: "
        f"{s['embed_ms']['p50']:.1f} ms p50 alone) and the MCP round trip; one run on a 2-core machine "
        "shared with other work, so p95 is noisy.",
    ]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--dsn", default=None, help="default: MEMPALACE_PG_DSN, else scripts/provision-postgres.sh"
    )
    ap.add_argument("--reps", type=int, default=3, help="rounds of all questions (latency over all)")
    ap.add_argument("--distractor-files", type=int, default=60, help="files of each Debian package")
    ap.add_argument("--distractor-chars", type=int, default=4000, help="characters kept of each")
    ap.add_argument("--json", type=Path, default=HERE / "out" / "bench_mcp_recall.json")
    ap.add_argument("--no-write", action="store_true", help="print the report, leave RESULTS.md alone")
    args = ap.parse_args()
    facts, questions = load_data()
    check_data(facts, questions)
    dsn = args.dsn or common.provisioned_dsn()
    schema = f"bench_recall_{os.getpid()}"
    work = Path(tempfile.mkdtemp(prefix="mpbench_recall_"))
    embedder, url = bm.start_embedder("minilm")
    try:
        corpus = work / "corpus"
        sizes = build_corpus(corpus, args.distractor_files, args.distractor_chars)
        palace = bm.Palace(work, "postgres", url, MODEL, dsn, schema)
        mine_s = palace.mine(corpus, first=True)
        drawer_of = drawers_by_file(dsn, schema, corpus)
        split = [n for n in NOTES.rglob("*.md") if len(drawer_of[str(n.relative_to(NOTES))]) != 1]
        if split:
            raise SystemExit(f"notes mined into more than one drawer: {split}")
        file_of = {d: f for f, ids in drawer_of.items() for d in ids}
        file_of.update({str(corpus / f): f for f in drawer_of})  # MemPalace's source_path
        kg_s = anyio.run(add_facts, palace, facts, lambda f: drawer_of[f["source_file"]][0])
        asked = anyio.run(ask_all, palace, url, questions, file_of, args.reps)
    finally:
        embedder.terminate()
        try:
            drop_palace(dsn, schema)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    result = score(questions, asked)
    meta = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["python benchmarks/bench_mcp_recall.py", *sys.argv[1:]]),
        "versions": ", ".join(f"{k} {v}" for k, v in common.versions(dsn).items()),
        "corpus": sizes,
        "drawers": sum(len(ids) for ids in drawer_of.values()),
        "mine_s": mine_s,
        "facts": len(facts),
        "kg_add_s": kg_s,
        "reps": args.reps,
    }
    common.keep_run(
        args.json, "mcp_recall", {"meta": meta, **result}, render(result, meta), write=not args.no_write
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
