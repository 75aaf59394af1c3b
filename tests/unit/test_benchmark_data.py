"""The recall benchmarks' frozen question sets still say what they claim, on the data they are run on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import bench_graph_recall as graph  # noqa: E402
import bench_mcp_recall as notes  # noqa: E402


def test_the_manual_questions_are_frozen_multi_hop_and_split(capsys):
    # freeze() recomputes the set from Debian's postgresql-doc-15 with MemPalace's own chunker, checks
    # every question is multi-hop there, and fails when it is not the committed set
    graph.freeze(write=False)
    assert "matches the installed manual" in capsys.readouterr().out
    facts, questions = graph.load_data()
    splits = [q["split"] for q in questions]
    assert len(questions) >= 150 and splits.count("held-out") >= 50
    assert len({q["id"] for q in questions}) == len(questions)
    predicates = {f["predicate"] for f in facts}
    assert predicates == {"purpose", "see_also"}


def test_a_question_that_names_its_answer_or_entity_is_refused():
    pages = graph.manual_pages()
    chunks_of = graph.predicted_chunks(pages)
    facts, questions = graph.load_data()
    evidence = {
        i: graph.locate(chunks_of, f["source_file"], f["find"], f["which"]) for i, f in enumerate(facts)
    }
    q = dict(questions[0])
    assert graph.question_problem(q, facts, evidence, chunks_of) is None
    named = {**q, "question": f"{q['question']} Is it {q['answer']}?"}
    assert "names the answer" in graph.question_problem(named, facts, evidence, chunks_of)
    # the entity's own page states its purpose under its name
    own = next(f for f in facts if f["subject"] == q["entity"] and f["predicate"] == "purpose")
    on_own_page = {**q, "answer_file": own["source_file"], "answer_find": own["find"], "answer": "nothing"}
    assert graph.question_problem(on_own_page, facts, evidence, chunks_of) == (
        f"the answer drawer names {q['entity']}"
    )


def test_the_team_notes_questions_hold():
    facts, questions = notes.load_data()
    notes.check_data(facts, questions)  # raises SystemExit with every inconsistency
    assert json.loads((notes.DATA / "questions.json").read_text())
