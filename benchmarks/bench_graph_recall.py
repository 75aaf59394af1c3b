"""Benchmark: graph-aware recall on a palace of real text nobody here wrote. MemPalace's
``mempalace_search`` against this plugin's ``pg_search_around_entity`` (restrict, boost, fuse) and
``pg_hybrid_search``, every call through a real MCP client, on PostgreSQL's own manual.

    python benchmarks/bench_graph_recall.py       # RESULTS.md, out/bench_graph_recall.json
    python benchmarks/bench_graph_recall.py --keep /var/tmp/graph_recall     # keep the mined palace
    python benchmarks/bench_graph_recall.py --reuse /var/tmp/graph_recall    # ask again, no mining
    python benchmarks/bench_graph_recall.py --freeze         # regenerate the frozen questions (see below)

The palace: every page of PostgreSQL 15's manual as Debian's ``postgresql-doc-15`` ships it (1,173 HTML
pages, navigation bars dropped, tags stripped; the reference pages of SQL commands and applications in
room ``reference``, the rest in ``manual``), mined by the real CLI (``mempalace init --backend postgres``
then ``mempalace mine``) with real all-MiniLM-L6-v2 embeddings: about 11,800 drawers.

The graph is the manual's own: every reference page states its purpose ("REINDEX — rebuild indexes")
and ends with a "See Also" list of related commands. ``facts.json`` holds one fact per purpose
(``REINDEX purpose "rebuild indexes"``, drawn from the drawer that states it) and one per See Also link
(``CREATE INDEX see_also REINDEX``, drawn from the drawer holding the list), each added through
MemPalace's own ``mempalace_kg_add`` with that drawer as ``source_drawer_id``.

The questions (``questions.json``) were generated from those links by ``--freeze`` and committed before
any tool was run on them, then left as they are: for a link E -> F, "Which command related to E is for
this: <F's purpose>?", given E. They are multi-hop: the answer is the drawer stating F's purpose, which
never names E, and which the graph reaches from E only through F (a fact about E leads to F, and the
drawer is the evidence of a fact about F). Both properties are checked on the mined drawers before any
question is asked. Every third question is held out: its figures are reported apart, as the final
figure, and nothing is tuned on them. ``--freeze`` recomputes the set from the installed manual and
fails when it differs from the frozen one unless told to write it.

Per question, one round per ``--reps``: ``mempalace_search(query, limit=5)`` on
``python -m mempalace.mcp_server``; on ``mempalace-pg mcp`` ``pg_search_around_entity(entity=E, query,
hops=2, limit=5)`` in each mode and ``pg_hybrid_search(query, limit=5)``. Metrics: recall@5 and MRR@5
(the reciprocal rank of the answer drawer among the five, 0 when absent) from the first round, p50/p95 ms
per call at the client over all rounds; and whether ``pg_entities_for_query(question)`` puts E first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
import bench_mcp_recall as recall  # noqa: E402
import bench_mine as bm  # noqa: E402
import common  # noqa: E402

from real_text import SOURCES, html_text  # noqa: E402

DATA = HERE / "data" / "pgdocs_graph"
MANUAL = SOURCES["postgresql-doc-15"][0]
MODEL = "all-MiniLM-L6-v2"
HELD_OUT_EVERY = 3
MIN_DRAWERS = 10_000
TEMPLATE = "Which command related to {entity} is for this: {purpose}?"

_NAV = re.compile(r'<div class="navheader">.*?</div>|<div class="navfooter">.*?</div>', re.S)
_NAME = re.compile(r'class="refnamediv"><h2><span class="refentrytitle">(.*?)</span></h2><p>(.*?)</p>', re.S)
_SEE_ALSO = re.compile(r"<h2>See Also</h2>(.*?)</div>", re.S)
_LINK = re.compile(r'href="((?:sql|app)-[a-z0-9-]+)\.html"')


# ----------------------------------------------------------------------------- the manual and its graph
def corpus_file(page: str) -> str:
    """Where a manual page (``sql-reindex``) is written in the mined corpus."""
    room = "reference" if page.startswith(("sql-", "app-")) else "manual"
    return f"{room}/{page}.txt"


def page_text(raw: str) -> str:
    return html_text(_NAV.sub(" ", raw)).strip() + "\n"


def manual_pages() -> dict[str, str]:
    """page name -> raw HTML, every page of the manual."""
    found = sorted(MANUAL.glob("*.html")) if MANUAL.is_dir() else []
    if not found:
        raise SystemExit("install Debian's postgresql-doc-15: bash scripts/real-text.sh postgresql-doc-15")
    return {p.stem: p.read_text(encoding="utf-8") for p in found}


def reference_graph(pages: dict[str, str]) -> dict[str, dict]:
    """Per reference page: its title, its purpose, the purpose line as the text shows it, and the
    reference pages its See Also list links to."""
    out = {}
    for page, raw in pages.items():
        named = _NAME.search(raw)
        if not page.startswith(("sql-", "app-")) or not named:
            continue
        title = html_text(named.group(1)).strip()
        line = html_text(named.group(2)).strip()
        if " — " not in line or line not in page_text(raw):
            continue
        see = _SEE_ALSO.search(raw)
        links = list(dict.fromkeys(_LINK.findall(see.group(1)))) if see else []
        out[page] = {"title": title, "purpose": line.split(" — ", 1)[1].strip(), "line": line, "see": links}
    return out


def candidate_facts(graph: dict[str, dict]) -> list[dict]:
    """A purpose fact per reference page (first drawer holding its purpose line) and a see_also fact
    per link (last drawer of the page naming the linked command: the See Also list ends the page)."""
    facts = []
    for page, ref in graph.items():
        facts.append(
            {
                "subject": ref["title"],
                "predicate": "purpose",
                "object": ref["purpose"],
                "source_file": corpus_file(page),
                "find": ref["line"],
                "which": "first",
            }
        )
        for target in ref["see"]:
            if target in graph and target != page:
                facts.append(
                    {
                        "subject": ref["title"],
                        "predicate": "see_also",
                        "object": graph[target]["title"],
                        "source_file": corpus_file(page),
                        "find": graph[target]["title"],
                        "which": "last",
                    }
                )
    return facts


# ----------------------------------------------------------------------------- checks on drawers
def names(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text, re.IGNORECASE) is not None


def locate(chunks_of: dict, source_file: str, find: str, which: str):
    """The key of the first or last drawer of ``source_file`` whose text holds ``find``, or None."""
    hits = [key for key, text in chunks_of.get(source_file, []) if find in text]
    return (hits[0] if which == "first" else hits[-1]) if hits else None


def answer_depth(facts: list[dict], evidence: dict, entity: str, answer) -> int | None:
    """How many hops from ``entity`` the walk of ``pg_search_around_entity`` first reaches a fact whose
    evidence is the drawer ``answer``."""
    key = entity.casefold()
    frontier, seen = {key}, {key}
    for depth in (1, 2):
        touching = [
            i for i, f in enumerate(facts) if {f["subject"].casefold(), f["object"].casefold()} & frontier
        ]
        if any(evidence[i] == answer for i in touching):
            return depth
        nxt = {n for i in touching for n in (facts[i]["subject"].casefold(), facts[i]["object"].casefold())}
        frontier, seen = nxt - seen, seen | nxt
    return None


def question_problem(q: dict, facts: list[dict], evidence: dict, chunks_of: dict) -> str | None:
    """Why ``q`` is not a multi-hop question on these drawers, or None when it is one."""
    answer = locate(chunks_of, q["answer_file"], q["answer_find"], "first")
    if answer is None:
        return f"no drawer of {q['answer_file']} holds {q['answer_find']!r}"
    text = dict(chunks_of[q["answer_file"]])[answer]
    if names(text, q["entity"]):
        return f"the answer drawer names {q['entity']}"
    if names(q["question"], q["answer"]):
        return f"the question names the answer {q['answer']}"
    depth = answer_depth(facts, evidence, q["entity"], answer)
    return None if depth == 2 else f"the answer is reached at hop {depth}"


def check(facts: list[dict], questions: list[dict], chunks_of: dict) -> dict:
    """Every fact's evidence drawer and every question's answer drawer on ``chunks_of`` (file -> [(key,
    text)]); fails when a fact has no drawer or a question is not multi-hop there."""
    evidence = {i: locate(chunks_of, f["source_file"], f["find"], f["which"]) for i, f in enumerate(facts)}
    problems = [f"fact {facts[i]}: no drawer holds it" for i, key in evidence.items() if key is None]
    problems += [
        f"{q['id']}: {p}" for q in questions if (p := question_problem(q, facts, evidence, chunks_of))
    ]
    if problems:
        raise SystemExit("benchmark data does not hold on these drawers:\n  " + "\n  ".join(problems[:40]))
    answers = {q["id"]: locate(chunks_of, q["answer_file"], q["answer_find"], "first") for q in questions}
    return {"evidence": evidence, "answers": answers}


def predicted_chunks(pages: dict[str, str]) -> dict[str, list]:
    """file -> [((file, chunk index), text)] as MemPalace's miner cuts the corpus file."""
    from mempalace.miner import chunk_text

    out = {}
    for page, raw in pages.items():
        name = corpus_file(page)
        out[name] = [((name, c["chunk_index"]), c["content"]) for c in chunk_text(page_text(raw), name)]
    return out


def freeze(write: bool) -> None:
    """The question set recomputed from the installed manual: written when ``write``, else compared."""
    pages = manual_pages()
    graph = reference_graph(pages)
    chunks_of = predicted_chunks(pages)
    facts = candidate_facts(graph)
    evidence = {i: locate(chunks_of, f["source_file"], f["find"], f["which"]) for i, f in enumerate(facts)}
    facts = [f for i, f in enumerate(facts) if evidence[i] is not None]
    evidence = {i: locate(chunks_of, f["source_file"], f["find"], f["which"]) for i, f in enumerate(facts)}
    questions = []
    for page, ref in graph.items():
        for target in ref["see"]:
            if target not in graph or target == page:
                continue
            answer = graph[target]
            q = {
                "entity": ref["title"],
                "question": TEMPLATE.format(entity=ref["title"], purpose=answer["purpose"]),
                "answer": answer["title"],
                "answer_file": corpus_file(target),
                "answer_find": answer["line"],
            }
            if question_problem(q, facts, evidence, chunks_of) is None:
                questions.append(q)
    for i, q in enumerate(questions):
        q["id"] = f"p{i:03d}"
        q["split"] = "held-out" if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1 else "dev"
    questions = [
        {k: q[k] for k in ("id", "split", "entity", "question", "answer", "answer_file", "answer_find")}
        for q in questions
    ]
    if write:
        DATA.mkdir(parents=True, exist_ok=True)
        (DATA / "facts.json").write_text(json.dumps(facts, ensure_ascii=False, indent=1) + "\n")
        (DATA / "questions.json").write_text(json.dumps(questions, ensure_ascii=False, indent=1) + "\n")
        print(f"wrote {len(facts)} facts and {len(questions)} questions to {DATA}")
        return
    frozen_facts, frozen_questions = load_data()
    if (facts, questions) != (frozen_facts, frozen_questions):
        raise SystemExit("the installed manual gives another question set than the frozen one")
    print(f"the frozen set ({len(facts)} facts, {len(questions)} questions) matches the installed manual")


def load_data() -> tuple[list[dict], list[dict]]:
    facts = json.loads((DATA / "facts.json").read_text())
    questions = json.loads((DATA / "questions.json").read_text())
    return facts, questions


# ----------------------------------------------------------------------------- the palace
def build_corpus(dest: Path, pages: dict[str, str]) -> None:
    for page, raw in pages.items():
        target = dest / corpus_file(page)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page_text(raw), encoding="utf-8")


def mined_chunks(dsn: str, schema: str, corpus: Path) -> dict[str, list]:
    """file (relative to the corpus) -> [(drawer id, text)] in chunk order, read in SQL."""
    import psycopg
    from psycopg import sql

    out: dict[str, list] = {}
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT source_file, id, document FROM {} WHERE collection = 'mempalace_drawers' "
                "ORDER BY source_file, (metadata->>'chunk_index')::int, id"
            ).format(sql.Identifier(schema, "drawers"))
        ).fetchall()
    for source, drawer_id, text in rows:
        out.setdefault(recall.relative(source, corpus), []).append((drawer_id, text))
    return out


def prepare(work: Path, url: str, dsn: str, schema: str, facts: list[dict]) -> dict:
    """Mine the manual into a new palace and add the facts; what it took, kept beside the palace."""
    corpus = work / "corpus"
    build_corpus(corpus, manual_pages())
    palace = bm.Palace(work, "postgres", url, MODEL, dsn, schema)
    mine_s = palace.mine(corpus, first=True)
    chunks_of = mined_chunks(dsn, schema, corpus)
    drawers = sum(len(v) for v in chunks_of.values())
    if drawers < MIN_DRAWERS:
        raise SystemExit(f"the palace has {drawers} drawers, the benchmark needs {MIN_DRAWERS}")
    where = check(facts, [], chunks_of)["evidence"]
    kg_s = anyio.run(recall.add_facts, palace, facts, lambda f: where[facts.index(f)])
    meta = {"schema": schema, "mine_s": mine_s, "kg_add_s": kg_s, "drawers": drawers}
    (work / "prepared.json").write_text(json.dumps(meta))
    return meta


# ----------------------------------------------------------------------------- the figures
def score(questions: list[dict], answers: dict, asked: dict) -> dict:
    """Per tool and split: recall@5, recall@1 and MRR@5 of the answer drawer; latency per call."""
    summary: dict = {}
    per_question = {q["id"]: {**q, "answer_drawer": answers[q["id"]], "tools": {}} for q in questions}
    for label in recall.CALLS:
        got = asked[label]
        ranks: dict[str, list] = {"all": [], "dev": [], "held-out": []}
        for q in questions:
            files = got["answers"][q["id"]]["files"]
            rank = next((i + 1 for i, d in enumerate(files) if d == answers[q["id"]]), None)
            per_question[q["id"]]["tools"][label] = {**got["answers"][q["id"]], "rank": rank}
            ranks["all"].append(rank)
            ranks[q["split"]].append(rank)
        summary[label] = {
            split: {
                "n": len(r),
                "recall_at_5": sum(x is not None for x in r) / len(r),
                "recall_at_1": sum(x == 1 for x in r) / len(r),
                "mrr_at_5": sum(1 / x for x in r if x) / len(r),
            }
            for split, r in ranks.items()
        }
        summary[label]["latency_ms"] = {
            **common.summary(got["ms"]),
            "all": [round(ms, 2) for ms in got["ms"]],
        }
    entities = asked["entities_for_query"]
    summary["entity_first"] = sum(entities[q["id"]][:1] == [q["entity"]] for q in questions)
    summary["entity_among_5"] = sum(q["entity"] in entities[q["id"]] for q in questions)
    summary["embed_ms"] = common.summary(asked["embed_ms"])
    sizes = sorted(
        per_question[q["id"]]["tools"]["around_entity restrict"]["evidence_drawers"] for q in questions
    )
    summary["neighbourhood"] = {"median": sizes[len(sizes) // 2], "min": sizes[0], "max": sizes[-1]}
    summary["held_out_missed"] = {
        label: [
            q["id"]
            for q in questions
            if q["split"] == "held-out" and per_question[q["id"]]["tools"][label]["rank"] is None
        ]
        for label in recall.CALLS
    }
    return {"summary": summary, "questions": per_question}


LABELS = {
    "mempalace_search": ("`mempalace_search` (MemPalace)", "question"),
    "around_entity restrict": ("`pg_search_around_entity` hops=2, restrict", "question + entity"),
    "around_entity boost": ("`pg_search_around_entity` hops=2, boost", "question + entity"),
    "around_entity fuse": ("`pg_search_around_entity` hops=2, fuse", "question + entity"),
    "around_entity restrict, name kept": (
        "`pg_search_around_entity` hops=2, restrict, `keep_entity_in_query`",
        "question + entity",
    ),
    "pg_hybrid_search": ("`pg_hybrid_search`", "question"),
}


def render(result: dict, meta: dict) -> str:
    s = result["summary"]
    n = {split: s["mempalace_search"][split]["n"] for split in ("dev", "held-out", "all")}
    lines = [
        f"## Graph-aware recall on PostgreSQL's manual ({meta['date']})",
        "",
        f"Command: `{meta['command']}`. {meta['versions']}. The palace: the {meta['pages']:,} pages of "
        f"PostgreSQL 15's manual (Debian's postgresql-doc-15), {meta['drawers']:,} drawers mined by the real "
        f"`mempalace` CLI with all-MiniLM-L6-v2 ({meta['mine_s']:.0f} s); {meta['facts']} facts from the "
        "manual's own structure (each reference page's purpose, each link of its See Also list) added "
        f"through MemPalace's `mempalace_kg_add` over MCP ({meta['kg_add_s']:.0f} s), each naming the drawer "
        f"it was drawn from. {n['all']} multi-hop questions generated from the See Also links and frozen "
        'in `benchmarks/data/pgdocs_graph/` before any tool ran on them ("Which command related to E is '
        "for this: <F's purpose>?\"; the drawer stating F's purpose never names E); every third held out "
        f"({n['held-out']}). Every call through the `mcp` SDK's `ClientSession` over `stdio_client`, warmed "
        f"up; recall@5 and MRR@5 of the answer drawer from the first of {meta['reps']} rounds, latency "
        "p50 / p95 at the client over all rounds.",
        "",
        "| tool | given | held-out recall@5 | held-out MRR@5 | dev recall@5 | dev MRR@5 | p50 / p95 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for label in recall.CALLS:
        r, lat = s[label], s[label]["latency_ms"]
        lines.append(
            f"| {LABELS[label][0]} | {LABELS[label][1]} | {r['held-out']['recall_at_5']:.2f} | "
            f"{r['held-out']['mrr_at_5']:.2f} | {r['dev']['recall_at_5']:.2f} | {r['dev']['mrr_at_5']:.2f} | "
            f"{lat['p50']:.1f} / {lat['p95']:.1f} |"
        )
    nb = s["neighbourhood"]
    lines += [
        "",
        "- The name-kept row is the tool as it ranked before commit 0254a09, which takes the entity's name "
        "out of the question before embedding it (the entity has chosen the neighbourhood; its name in the "
        "question made E's own drawers the nearest). That change was chosen on the dev split alone, by "
        "calls to the library on this palace; the held-out questions were asked only through this "
        "benchmark.",
        f"- `pg_entities_for_query(question)` put E first for {s['entity_first']} of {n['all']} questions, "
        f"among its five for {s['entity_among_5']}.",
        f"- The neighbourhood restrict ranks (drawers that are the evidence of a fact within 2 hops of E): "
        f"median {nb['median']}, from {nb['min']} to {nb['max']}.",
        f"- Latency includes embedding the question (MiniLM on CPU: {s['embed_ms']['p50']:.1f} ms p50 alone) "
        "and the MCP round trip.",
        "- The questions are mechanical (one template, the manual's own purpose line as the thing asked "
        "for), so the purpose's words are in the answer drawer: a lexical or vector search that finds the "
        "purpose line finds the answer. What the graph adds is telling apart the many commands of the "
        'manual with near-identical purposes ("change the definition of a ...").',
    ]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--dsn", default=None, help="default: MEMPALACE_PG_DSN, else scripts/provision-postgres.sh"
    )
    ap.add_argument("--reps", type=int, default=2, help="rounds of all questions (latency over all)")
    ap.add_argument("--keep", type=Path, help="mine into this directory and keep the palace (and schema)")
    ap.add_argument("--reuse", type=Path, help="ask the palace a --keep run left, without mining")
    ap.add_argument("--freeze", action="store_true", help="recompute the question set and compare it")
    ap.add_argument("--write-frozen", action="store_true", help="with --freeze: write it instead")
    ap.add_argument("--json", type=Path, default=HERE / "out" / "bench_graph_recall.json")
    ap.add_argument("--no-write", action="store_true", help="print the report, leave RESULTS.md alone")
    args = ap.parse_args()
    if args.freeze:
        freeze(args.write_frozen)
        return 0
    facts, questions = load_data()
    dsn = args.dsn or common.provisioned_dsn()
    work = args.reuse or args.keep or Path(tempfile.mkdtemp(prefix="mpbench_graph_"))
    embedder, url = bm.start_embedder("minilm")
    schema = None
    try:
        if args.reuse:
            prepared = json.loads((work / "prepared.json").read_text())
        else:
            work.mkdir(parents=True, exist_ok=True)
            prepared = prepare(work, url, dsn, f"bench_graph_{os.getpid()}", facts)
        schema = prepared["schema"]
        palace = bm.Palace(work, "postgres", url, MODEL, dsn, schema)
        chunks_of = mined_chunks(dsn, schema, work / "corpus")
        answers = check(facts, questions, chunks_of)["answers"]
        file_of = {d: d for pieces in chunks_of.values() for d, _ in pieces}
        asked = anyio.run(recall.ask_all, palace, url, questions, file_of, args.reps)
    finally:
        embedder.terminate()
        if not (args.keep or args.reuse):
            try:
                if schema:
                    recall.drop_palace(dsn, schema)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    result = score(questions, answers, asked)
    meta = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["python benchmarks/bench_graph_recall.py", *sys.argv[1:]]),
        "versions": ", ".join(f"{k} {v}" for k, v in common.versions(dsn).items()),
        "pages": len(chunks_of),
        "facts": len(facts),
        "reps": args.reps,
        **{k: prepared[k] for k in ("mine_s", "kg_add_s", "drawers")},
    }
    common.keep_run(
        args.json, "graph_recall", {"meta": meta, **result}, render(result, meta), write=not args.no_write
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
