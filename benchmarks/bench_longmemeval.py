"""Benchmark: hybrid search against vector-only search and MemPalace's ``mempalace_search`` on
LongMemEval, the labelled long-term-memory benchmark MemPalace reports on.

    python benchmarks/bench_longmemeval.py                 # writes RESULTS.md and out/bench_longmemeval.json
    python benchmarks/bench_longmemeval.py --limit 40 --no-write   # quick look

The data. LongMemEval's questions are each asked of their own haystack of about 50 chat sessions, of
which one to six hold the answer. The dataset itself is on Hugging Face, which these machines cannot
reach; MemPalace's sdist (``scripts/mempalace-sdist.sh``) ships its LongMemEval run on the
``longmemeval_s`` set: per question, the question, its type and every haystack session with its id and
the first 500 characters of the user's turns (``benchmarks/results_mempal_raw_session_*.jsonl``). The
evidence sessions are the ones LongMemEval names ``answer_*`` (which reproduces the recall MemPalace
logged for every question: checked before anything runs). So this is LongMemEval_s with sessions cut
to 500 characters, the same cut for every tool; MemPalace's split (``lme_split_50_450.json``) gives a
50-question dev set and a 450-question held-out set, reported apart.

The palace. Every session is one file, ``q_<question id>/<session id>.txt``, mined by the real CLI
(``mempalace init --backend postgres --yes --no-llm`` then ``mempalace mine``) with real
all-MiniLM-L6-v2 embeddings (scripts/embedding_server.py, MemPalace's ``openai-compat`` setting): one
room per question, so each question is searched in its own haystack through the room filter, as
LongMemEval asks.

The searches, per question, k = 10, all in the question's room: ``mempalace_search`` on MemPalace's MCP
server with its default candidate strategy (``vector``) and with ``union`` (its vector candidates and
this plugin's ``lexical_search``'s, fused); ``pg_hybrid_search`` on this plugin's MCP server (vector and
BM25 arms fused by rank in one statement); and vector-only search, the collection's ``query`` with the
question's MiniLM vector (what MemPalace's searcher asks a backend for). Metric: recall_any@5 and @10
at session level (a hit when a result is an evidence session), as MemPalace's LongMemEval bench reports;
p50 per call for the MCP tools.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
import bench_mcp_recall as mr  # noqa: E402
import bench_mine as bm  # noqa: E402
import common  # noqa: E402

from mcp_client import mempalace_server, pg_server, stdio_session  # noqa: E402

MODEL = "all-MiniLM-L6-v2"
K = 10
RUN_GLOB = "results_mempal_raw_session_*.jsonl"

#: label -> (server, tool, extra arguments)
CALLS = {
    "mempalace_search": ("mempalace", "mempalace_search", {}),
    "mempalace_search union": ("mempalace", "mempalace_search", {"candidate_strategy": "union"}),
    "pg_hybrid_search": ("pg", "pg_hybrid_search", {}),
}
VECTOR = "vector only (query)"
LABELS = [*CALLS, VECTOR]


# ----------------------------------------------------------------------------- the data, checked
def sdist() -> Path:
    import subprocess

    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "mempalace-sdist.sh"), sys.executable],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    return Path(out.strip().splitlines()[-1])


def load_questions(source: Path) -> tuple[list[dict], dict]:
    """The questions with their haystacks and evidence sessions, and MemPalace's dev/held-out split.
    Fails unless the evidence sessions (``answer_*``) give the recall MemPalace logged for each
    question, at every k it logged."""
    runs = sorted((source / "benchmarks").glob(RUN_GLOB))
    if not runs:
        raise SystemExit(f"no LongMemEval run in {source}/benchmarks ({RUN_GLOB})")
    questions, problems = [], []
    for line in runs[0].read_text().splitlines():
        row = json.loads(line)
        items = row["retrieval_results"]["ranked_items"]
        evidence = {i["corpus_id"] for i in items if i["corpus_id"].startswith("answer")}
        logged = row["retrieval_results"]["metrics"]["session"]
        for k in (1, 5, 10):
            got = float(any(i["corpus_id"] in evidence for i in items[:k]))
            if got != logged[f"recall_any@{k}"]:
                problems.append(f"{row['question_id']}: recall_any@{k} {got} != {logged[f'recall_any@{k}']}")
        questions.append(
            {
                "id": row["question_id"],
                "type": row["question_type"],
                "question": row["question"],
                "answer": row["answer"],
                "sessions": {i["corpus_id"]: i["text"] for i in items},
                "timestamps": {i["corpus_id"]: i.get("timestamp") for i in items},
                "evidence": sorted(evidence),
            }
        )
    if problems:
        raise SystemExit(
            "the evidence sessions do not give MemPalace's logged recall:\n  " + "\n  ".join(problems)
        )
    split = json.loads((source / "benchmarks" / "lme_split_50_450.json").read_text())
    return questions, {"dev": set(split["dev"]), "held_out": set(split["held_out"])}


def room(question: dict) -> str:
    return f"q_{question['id']}"


def build_corpus(dest: Path, questions: list[dict]) -> int:
    n = 0
    for q in questions:
        folder = dest / room(q)
        folder.mkdir(parents=True)
        for cid, text in q["sessions"].items():
            (folder / f"{cid}.txt").write_text(text)
            n += 1
    return n


def session_of_drawers(dsn: str, schema: str) -> dict[str, tuple[str, str]]:
    """drawer id -> (room, session id), read in SQL."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT id, metadata->>'room', metadata->>'source_file' FROM {} "
                "WHERE collection = 'mempalace_drawers'"
            ).format(sql.Identifier(schema, "drawers"))
        ).fetchall()
    return {d: (r, Path(source).stem) for d, r, source in rows}


# ----------------------------------------------------------------------------- the searches
def sessions_of(tool: str, answer: dict, session_of: dict) -> list[str]:
    rows = answer.get("results", [])
    if tool == "mempalace_search":
        return [
            session_of[r["drawer_id"]][1]
            if r.get("drawer_id") in session_of
            else Path(r.get("source_path", "?")).stem
            for r in rows
        ]
    return [session_of[r["id"]][1] for r in rows]


async def ask_mcp(palace: bm.Palace, questions: list[dict], session_of: dict) -> dict:
    out: dict = {label: {"ms": [], "sessions": {}} for label in CALLS}
    async with (
        stdio_session(mempalace_server(palace.path), palace.env) as mp,
        stdio_session(pg_server(palace.path), palace.env) as pg,
    ):
        sessions = {"mempalace": mp, "pg": pg}
        warm = questions[0]
        for server, tool, extra in CALLS.values():  # warm-up: not measured
            await mr.call_tool(
                sessions[server], tool, {"query": warm["question"], "limit": K, "room": room(warm), **extra}
            )
        for q in questions:
            for label, (server, tool, extra) in CALLS.items():
                args = {"query": q["question"], "limit": K, "room": room(q), **extra}
                ms, answer = await mr.call_tool(sessions[server], tool, args)
                out[label]["ms"].append(ms)
                out[label]["sessions"][q["id"]] = sessions_of(tool, answer, session_of)
    return out


def ask_vector(
    palace: bm.Palace, url: str, dsn: str, tag: str, questions: list[dict], session_of: dict
) -> dict:
    """The collection's own nearest-neighbour query, in this process, with the question's vector."""
    os.environ["MEMPALACE_CONFIG_DIR"] = palace.env["MEMPALACE_CONFIG_DIR"]
    _, col = common.open_collection("postgres", str(palace.path), dsn, tag)
    vectors = bm.embed(url, [q["question"] for q in questions])
    out: dict = {"ms": [], "sessions": {}}
    for q, v in zip(questions, vectors):
        t0 = time.perf_counter()
        got = col.query(
            query_embeddings=[v.tolist()], n_results=K, where={"room": room(q)}, include=["metadatas"]
        )
        out["ms"].append((time.perf_counter() - t0) * 1000)
        out["sessions"][q["id"]] = [session_of[d][1] for d in got["ids"][0]]
    return out


# ----------------------------------------------------------------------------- answers that changed
def iso(timestamp: str) -> str:
    """LongMemEval's ``2023/05/30 (Tue) 13:53`` as ``2023-05-30T13:53:00Z``."""
    day, _, clock = timestamp.split(" ")
    return f"{day.replace('/', '-')}T{clock}:00Z"


def changed_facts(questions: list[dict], drawer_of: dict) -> list[dict]:
    """For each knowledge-update question whose evidence sessions were all mined: one fact per evidence
    session, oldest first, ``user answer_<id> value_<n>`` valid from the session's time and drawn from
    it (the last value is the current answer). LongMemEval says which session is newer; the facts
    state only that, as a fact extractor reading both sessions would."""
    facts = []
    for q in questions:
        if q["type"] != "knowledge-update":
            continue
        drawers = [drawer_of.get((room(q), e)) for e in q["evidence"]]
        if None in drawers or len(drawers) < 2:
            continue
        ordered = sorted(zip(q["evidence"], drawers), key=lambda e: iso(q["timestamps"][e[0]]))
        for n, (session, drawer) in enumerate(ordered):
            facts.append(
                {
                    "question": q["id"],
                    "session": session,
                    "current": n == len(ordered) - 1,
                    "args": {
                        "subject": "user",
                        "predicate": f"answer_{q['id']}",
                        "object": f"value_{n}",
                        "valid_from": iso(q["timestamps"][session]),
                        "source_drawer_id": drawer,
                    },
                }
            )
    return facts


async def ask_changed(
    palace: bm.Palace, questions: list[dict], facts: list[dict], session_of: dict, add: bool = True
) -> dict:
    """The facts through MemPalace's own ``mempalace_kg_add`` (unless ``add`` is false: a reused palace
    has them); then each changed question to
    ``mempalace_search`` and to ``pg_hybrid_search`` marking and demoting: per tool, the ranks of the
    current and the older evidence session and, for pg_hybrid_search, whether each was marked stale."""
    asked = {f["question"] for f in facts}
    out: dict = {"mempalace_search": {}, "pg_hybrid_search mark": {}, "pg_hybrid_search demote": {}}
    async with (
        stdio_session(mempalace_server(palace.path), palace.env) as mp,
        stdio_session(pg_server(palace.path), palace.env) as pg,
    ):
        for f in facts if add else []:
            added = await mp.call("mempalace_kg_add", **f["args"])
            if added.get("success") is not True:
                raise RuntimeError(f"mempalace_kg_add {f['args']}: {added}")
        for q in questions:
            if q["id"] not in asked:
                continue
            base = {"query": q["question"], "limit": K, "room": room(q)}
            calls = {
                "mempalace_search": (mp, "mempalace_search", base),
                "pg_hybrid_search mark": (pg, "pg_hybrid_search", {**base, "stale": "mark"}),
                "pg_hybrid_search demote": (pg, "pg_hybrid_search", {**base, "stale": "demote"}),
            }
            for label, (session, tool, args) in calls.items():
                _, answer = await mr.call_tool(session, tool, args)
                rows = answer.get("results", [])
                found = sessions_of(tool, answer, session_of)
                out[label][q["id"]] = {
                    "sessions": found,
                    "stale": [r.get("stale") for r in rows] if tool == "pg_hybrid_search" else None,
                }
    return out


def score_changed(facts: list[dict], asked: dict) -> dict:
    """Per tool: in how many changed questions the current evidence session ranks above the older one
    (found, and the older one lower or absent), and of the older sessions returned, how many were
    marked stale (pg_hybrid_search)."""
    current = {f["question"]: f["session"] for f in facts if f["current"]}
    older = {f["question"]: f["session"] for f in facts if not f["current"]}
    out = {}
    for label, answers in asked.items():
        above = returned_old = marked_old = returned_new = marked_new = 0
        for qid, got in answers.items():
            found = got["sessions"]
            rank = {s: i for i, s in reversed(list(enumerate(found)))}
            new, old = rank.get(current[qid]), rank.get(older[qid])
            above += new is not None and (old is None or new < old)
            if got["stale"] is not None:
                for i, s in enumerate(found):
                    if s == older[qid]:
                        returned_old += 1
                        marked_old += bool(got["stale"][i])
                    elif s == current[qid]:
                        returned_new += 1
                        marked_new += bool(got["stale"][i])
        out[label] = {
            "questions": len(answers),
            "current_above_older": above,
            "older_returned": returned_old if label.startswith("pg_") else None,
            "older_marked_stale": marked_old,
            "current_returned": returned_new,
            "current_marked_stale": marked_new,
        }
    return out


# ----------------------------------------------------------------------------- the figures
def score(questions: list[dict], split: dict, asked: dict) -> dict:
    subsets = {"all": {q["id"] for q in questions}, **split}
    types = sorted({q["type"] for q in questions})
    summary: dict = {}
    per_question = {q["id"]: {"type": q["type"], "evidence": q["evidence"], "tools": {}} for q in questions}
    for label in LABELS:
        got = asked[label]
        hits = {}
        for q in questions:
            found = got["sessions"][q["id"]]
            ev = set(q["evidence"])
            rank = next((i + 1 for i, s in enumerate(found) if s in ev), None)
            hits[q["id"]] = rank
            per_question[q["id"]]["tools"][label] = {"sessions": found, "rank": rank}
        row = {}
        for name, ids in [
            *subsets.items(),
            *((t, {q["id"] for q in questions if q["type"] == t}) for t in types),
        ]:
            ranks = [hits[i] for i in hits if i in ids]
            if ranks:
                row[name] = {
                    "n": len(ranks),
                    "recall_at_5": sum(r is not None and r <= 5 for r in ranks) / len(ranks),
                    "recall_at_10": sum(r is not None and r <= 10 for r in ranks) / len(ranks),
                }
        row["latency_ms"] = common.summary(got["ms"])
        summary[label] = row
    return {"summary": summary, "types": types, "questions": per_question}


def render(result: dict, meta: dict) -> str:
    s = result["summary"]
    lines = [
        f"## Hybrid search on LongMemEval ({meta['date']})",
        "",
        f"Command: `{meta['command']}`. {meta['versions']}. {meta['questions']} questions of LongMemEval_s "
        f"as MemPalace's sdist ships them (each haystack session cut to its first 500 characters of user "
        f"turns; evidence sessions checked against MemPalace's logged recall), {meta['drawers']:,} drawers "
        f"in one palace, one room per question, mined by the real `mempalace` CLI with all-MiniLM-L6-v2 "
        f"({meta['mine_s']:.0f} s; {meta['files'] - meta['drawers']} sessions shorter than MemPalace's "
        f"smallest chunk were not mined, leaving {len(meta['unfindable'])} questions with no evidence to "
        "find, a miss for every search). "
        f"Each question searched in its own room, k = {K}; MCP tools through the "
        "`mcp` SDK's client over stdio, one session per server, warmed up. Session-level recall_any "
        "(a hit when one of the results is an evidence session).",
        "",
        "| search | all: recall@5 / @10 | held-out (450) @5 / @10 | dev (50) @5 / @10 | p50 / p95 ms |",
        "|---|---|---|---|---|",
    ]
    for label in LABELS:
        r = s[label]
        cells = [
            f"{r[k]['recall_at_5']:.3f} / {r[k]['recall_at_10']:.3f}" if k in r else "-"
            for k in ("all", "held_out", "dev")
        ]
        lat = r["latency_ms"]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {lat['p50']:.1f} / {lat['p95']:.1f} |")
    lines += ["", "By question type, recall@5 (all questions):", ""]
    lines.append("| search | " + " | ".join(f"{t} ({s[LABELS[0]][t]['n']})" for t in result["types"]) + " |")
    lines.append("|---|" + "---|" * len(result["types"]))
    for label in LABELS:
        lines.append(
            f"| {label} | " + " | ".join(f"{s[label][t]['recall_at_5']:.3f}" for t in result["types"]) + " |"
        )
    c = result["changed"]
    n = c["mempalace_search"]["questions"]
    lines += [
        "",
        f"**Answers that changed** ({n} knowledge-update questions whose two evidence sessions were both "
        "mined: the older one holds the answer as it was, the newer one the answer now). After the runs "
        "above, one fact per evidence session was added through MemPalace's `mempalace_kg_add` "
        "(`user answer_<question> value_<n>`, valid from the session's time, `source_drawer_id` its "
        "drawer): LongMemEval's own label of which session is newer, written as a fact extractor would "
        "write it. Then each question again, k = 10:",
        "",
        "| search | current session above the older one | older session returned / marked stale "
        "| current session returned / marked stale |",
        "|---|---|---|---|",
    ]
    for label, r in c.items():
        marks = (
            f"{r['older_returned']} / {r['older_marked_stale']} | {r['current_returned']} / "
            f"{r['current_marked_stale']}"
            if r["older_returned"] is not None
            else "- | -"
        )
        lines.append(f"| {label} | {r['current_above_older']} of {r['questions']} | {marks} |")
    lines += [
        "",
        "`vector only` is timed in-process (the collection's `query`, no MCP, no embedding); the MCP "
        "tools' times include embedding the question. The data per question (each tool's sessions in "
        f"rank order, the evidence) is in `benchmarks/out/{meta['json']}`.",
    ]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--dsn", default=None, help="default: MEMPALACE_PG_DSN, else scripts/provision-postgres.sh"
    )
    ap.add_argument("--limit", type=int, default=0, help="only the first N questions (0: all)")
    ap.add_argument(
        "--every", type=int, default=1, help="every N-th question, and every knowledge-update one (default 1)"
    )
    ap.add_argument(
        "--complement",
        action="store_true",
        help="the questions --every N leaves out instead (a held-out set)",
    )
    ap.add_argument("--json", type=Path, default=HERE / "out" / "bench_longmemeval.json")
    ap.add_argument("--no-write", action="store_true", help="print the report, leave RESULTS.md alone")
    ap.add_argument("--keep", type=Path, help="mine into this directory and keep it (and the schema)")
    ap.add_argument("--reuse", type=Path, help="ask the palace a --keep run left (same --every/--limit)")
    args = ap.parse_args()
    questions, split = load_questions(sdist())
    chosen = [i % args.every == 0 or q["type"] == "knowledge-update" for i, q in enumerate(questions)]
    questions = [q for q, c in zip(questions, chosen) if c != args.complement]
    if args.limit:
        questions = questions[: args.limit]
    dsn = args.dsn or common.provisioned_dsn()
    tag = f"lme_{os.getpid()}"
    schema = f"bench_{tag}"
    work = args.reuse or args.keep or Path(tempfile.mkdtemp(prefix="mpbench_lme_"))
    embedder, url = bm.start_embedder("minilm")
    try:
        if args.reuse:
            prepared = json.loads((work / "prepared.json").read_text())
            schema, files, mine_s = prepared["schema"], prepared["files"], prepared["mine_s"]
            tag = schema.removeprefix("bench_")
            if prepared["questions"] != [q["id"] for q in questions]:
                raise SystemExit(
                    f"{work} holds another question set: give the --every/--limit it was kept with"
                )
            palace = bm.Palace(work, "postgres", url, MODEL, dsn, schema)
        else:
            work.mkdir(parents=True, exist_ok=True)
            files = build_corpus(work / "corpus", questions)
            palace = bm.Palace(work, "postgres", url, MODEL, dsn, schema)
            mine_s = palace.mine(work / "corpus", first=True)
            print(f"[bench_longmemeval] mined {files} files in {mine_s:.0f} s", file=sys.stderr, flush=True)
            prepared = {
                "schema": schema,
                "files": files,
                "mine_s": mine_s,
                "questions": [q["id"] for q in questions],
            }
            (work / "prepared.json").write_text(json.dumps(prepared))
        session_of = session_of_drawers(dsn, schema)
        wrong = [d for d, (r, _) in session_of.items() if not r.startswith("q_")]
        if wrong or len(session_of) > files:
            raise SystemExit(
                f"{len(session_of)} drawers for {files} files; {len(wrong)} outside a question's room"
            )
        # MemPalace's miner skips a file shorter than its smallest chunk: a session no search can find
        mined = set(session_of.values())
        unfindable = [q["id"] for q in questions if not any((room(q), e) in mined for e in q["evidence"])]
        asked = anyio.run(ask_mcp, palace, questions, session_of)
        asked[VECTOR] = ask_vector(palace, url, dsn, tag, questions, session_of)
        drawer_of = {v: d for d, v in session_of.items()}
        facts = changed_facts(questions, drawer_of)
        asked_changed = anyio.run(ask_changed, palace, questions, facts, session_of, not args.reuse)
        changed = score_changed(facts, asked_changed)
    finally:
        embedder.terminate()
        if args.keep:
            print(f"[bench_longmemeval] kept: schema {schema}, palace {args.keep}", file=sys.stderr)
        if not (args.keep or args.reuse):
            try:
                mr.drop_palace(dsn, schema)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    result = score(questions, split, asked)
    result["changed"] = changed
    meta = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["python benchmarks/bench_longmemeval.py", *sys.argv[1:]]),
        "versions": ", ".join(f"{k} {v}" for k, v in common.versions(dsn).items()),
        "questions": len(questions),
        "drawers": len(session_of),
        "mine_s": mine_s,
        "files": files,
        "unfindable": unfindable,
        "json": args.json.name,
    }
    common.keep_run(
        args.json, "longmemeval", {"meta": meta, **result}, render(result, meta), write=not args.no_write
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
