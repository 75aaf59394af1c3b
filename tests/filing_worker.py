"""One writer process of the lock-order stress test (tests/integration/test_lock_order.py).

    python tests/filing_worker.py KIND PALACE_PATH SEED COUNT OUT.json START_DIR

Writes COUNT memories to the palace through one of the plugin's write paths and writes what it did to
OUT.json: every call's outcome, so the test can check that each succeeded and that each fact is stored
once. The n-th write of every writer draws its entities from the same few names (:func:`entities`), in
an order drawn from SEED: writers started together create the same new entities at about the same
time, in different orders, which is when entity creation meets itself.

Every writer imports what it needs, writes ``ready-SEED`` in START_DIR, and waits for ``go`` there
before its first write, so that all writers write at the same time.

KIND is the path:

* ``file``: the ``pg_file_memory`` tool (a drawer and its facts in one transaction);
* ``kg``: the knowledge graph's own writes, one statement each, as MemPalace's ``kg_add``,
  ``kg_invalidate`` and a supersede reach them (add_triple, supersede, invalidate);
* ``unit``: :func:`mempalace_pg.unit_of_work`, a drawer then its facts added one by one;
* ``import``: ``kg import``'s batches (entities, then facts, each batch one transaction).
"""

from __future__ import annotations

import json
import random
import sys
import time
import traceback
from pathlib import Path

PREDICATES = ["knows", "mentors", "works_with", "reviews"]


def entities(step: int) -> list[str]:
    """The names every writer's ``step``-th write draws from."""
    return [f"{name} {step}" for name in ("Ada", "Brook", "Cyd", "Dana", "Eli")]


def facts_for(rng: random.Random, step: int, k: int) -> list[dict]:
    picked = rng.sample(entities(step), k)  # a random order of distinct entities
    facts = []
    for a, b in zip(picked, picked[1:] + picked[:1]):
        facts.append({"subject": a, "predicate": rng.choice(PREDICATES), "object": b})
    return facts


def run_file(palace: str, rng: random.Random, tag: str, count: int) -> list[dict]:
    from mempalace_pg.mcp_tools.tools import PalaceTools

    tools = PalaceTools(palace)
    out = []
    for i in range(count):
        facts = facts_for(rng, i, rng.randint(2, 4))
        answer = tools.file_memory(
            wing=f"team_{tag}",  # a wing of its own: writers meet on the graph, not on counters
            room=rng.choice(["people", "work"]),
            content=f"{tag} memory {i}: "
            + "; ".join(f"{f['subject']} {f['predicate']} {f['object']}" for f in facts),
            facts=facts,
        )
        out.append({"facts": facts, "answer": answer})
    return out


def run_kg(palace: str, rng: random.Random, tag: str, count: int) -> list[dict]:
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    kg = AgeKnowledgeGraph(palace_path=palace)
    out = []
    for i in range(count):
        a, b, c = rng.sample(entities(i), 3)
        predicate = rng.choice(PREDICATES)
        step = i % 3
        if step == 0:
            out.append({"add": [a, predicate, b], "triple_id": kg.add_triple(a, predicate, b)})
        elif step == 1:
            out.append({"supersede": [a, predicate, b, c], "triple_id": kg.supersede(a, predicate, b, c)})
        else:
            kg.invalidate(b, predicate, a)
            out.append({"invalidate": [b, predicate, a]})
    return out


def run_unit(palace: str, rng: random.Random, tag: str, count: int) -> list[dict]:
    from mempalace_pg import unit_of_work
    from mempalace_pg.retrieval.embedding import document_vectors

    out = []
    for i in range(count):
        facts = facts_for(rng, i, rng.randint(2, 3))
        drawer = f"{tag}_{i}"
        text = f"{tag} unit {i}"
        with unit_of_work(palace) as uow:
            uow.add_drawers(
                ids=[drawer],
                documents=[text],
                embeddings=document_vectors([text]),
                metadatas=[{"wing": f"team_{tag}", "room": rng.choice(["people", "work"])}],
            )
            ids = [
                uow.add_triple(f["subject"], f["predicate"], f["object"], source_drawer_id=drawer)
                for f in facts
            ]
        out.append({"facts": facts, "drawer": drawer, "triple_ids": ids})
    return out


def run_import(palace: str, rng: random.Random, tag: str, count: int) -> list[dict]:
    from mempalace_pg.graph.kg import AgeKnowledgeGraph
    from mempalace_pg.graph.kg_import import write_batch
    from mempalace_pg.graph.values import entity_id_of

    kg = AgeKnowledgeGraph(palace_path=palace)
    out = []
    for i in range(count):
        names = rng.sample(entities(i), 4)
        rows = [
            {
                "id": entity_id_of(n),
                "name": n,
                "type": "person",
                "properties": "{}",
                "created_at": "2026-01-01T00:00:00",
            }
            for n in names
        ]
        triples = [
            {
                "id": f"t_{tag}_{i}_{j}",
                "subject": entity_id_of(a),
                "predicate": "imported_with",
                "object": entity_id_of(b),
                "valid_from": None,
                "valid_to": "2020-01-01",  # closed: an import's history, never merged with open facts
                "confidence": 1.0,
                "source_closet": None,
                "source_file": None,
                "source_drawer_id": None,
                "adapter_name": None,
                "extracted_at": "2026-01-01T00:00:00",
            }
            for j, (a, b) in enumerate(zip(names, names[1:]))
        ]
        write_batch(kg, "entities", rows)
        write_batch(kg, "triples", triples)
        out.append({"triple_ids": [t["id"] for t in triples]})
    return out


KINDS = {"file": run_file, "kg": run_kg, "unit": run_unit, "import": run_import}


def wait_for_start(start_dir: str, seed: str) -> None:
    import mempalace_pg.graph.kg_import  # noqa: F401  (every writer's imports, before the start)
    import mempalace_pg.mcp_tools.tools  # noqa: F401
    from mempalace_pg import unit_of_work  # noqa: F401

    start = Path(start_dir)
    (start / f"ready-{seed}").write_text("ready", encoding="utf-8")
    while not (start / "go").exists():
        time.sleep(0.02)


def main() -> int:
    kind, palace, seed, count, out_path, start_dir = sys.argv[1:7]
    wait_for_start(start_dir, seed)
    rng = random.Random(int(seed))
    tag = f"{kind}{seed}"
    result: dict = {"kind": kind, "seed": int(seed)}
    try:
        result["calls"] = KINDS[kind](palace, rng, tag, int(count))
    except Exception as exc:  # reported to the test, which fails with it
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
