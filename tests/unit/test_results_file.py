"""benchmarks/RESULTS.md answers by question: each level-1 heading is a question of common.QUESTIONS that
opens with its current answer, every benchmark section sits under its question with its anchor, and
record_report keeps it so when a run replaces a section or adds one."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import common  # noqa: E402


def test_results_md_is_grouped_by_question_with_the_answer_first():
    head, groups = common.split_results((ROOT / "benchmarks" / "RESULTS.md").read_text("utf-8"))
    assert [intro.splitlines()[0][2:] for intro, _ in groups] == list(common.QUESTIONS)
    for (intro, sections), (question, names) in zip(groups, common.QUESTIONS.items()):
        assert "**The answer now.**" in intro, question
        placed = []
        for section in sections:
            anchor = re.search(r'<a id="([^"]+)"></a>', section)
            assert anchor, section.splitlines()[0]
            placed.append(anchor.group(1).replace("-", "_"))
        assert placed and set(placed) <= set(names), (question, placed)


def test_record_report_replaces_in_place_and_files_a_new_section_under_its_question(tmp_path):
    out = tmp_path / "RESULTS.md"
    common.record_report(out, "filtered", "## Filtered, first run\n\nfigures 1\n")
    common.record_report(out, "bench_kg", "## The graph, first run\n\nfigures 2\n")
    common.record_report(out, "filtered", "## Filtered, second run\n\nfigures 3\n")
    head, groups = common.split_results(out.read_text())
    titles = {intro.splitlines()[0]: [s.splitlines()[0] for s in sections] for intro, sections in groups}
    assert titles == {
        "# Search: how fast does a palace answer?": ["## Filtered, second run"],
        "# The graph: facts, and the graph joined with the drawers": ["## The graph, first run"],
    }
    text = out.read_text()
    assert text.count('<a id="filtered"></a>') == 1 and "figures 1" not in text
    history = (tmp_path / "out" / "history" / "filtered.md").read_text()
    assert "## Filtered, first run" in history and "figures 1" in history and "<a id=" not in history
