"""The documentation holds together: every relative link in the README, CONTRIBUTING, docs/ and the
benchmark results names a file that exists (and, with ``#anchor``, a heading in it), and every code block
that can be checked without a server is: bash blocks parse (``bash -n``), Python blocks compile. Against a
real server: the SQL blocks run in tests/integration/test_cookbook.py, every Python block runs in
tests/integration/test_doc_python.py, the move-in page's and the README's commands run in
tests/integration/test_move_in.py, and the demo's output blocks are compared with the demo's output by
tests/integration/test_demo.py."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "benchmarks" / "RESULTS.md"]
    + list((ROOT / "docs").glob("*.md"))
)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _ids(pages):
    return [str(p.relative_to(ROOT)) for p in pages]


def _without_code(text: str) -> str:
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The headings' anchors, and the ids of ``<a id="...">`` anchors (RESULTS.md's sections carry one)."""
    text = _without_code(page.read_text("utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)} | set(
        re.findall(r'<a id="([^"]+)"></a>', text)
    )


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_every_relative_link_names_a_file_and_heading_that_exist(page):
    broken = []
    for match in LINK.finditer(_without_code(page.read_text(encoding="utf-8"))):
        target = match.group(1) or match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert broken == []


def _blocks(language: str):
    found = []
    for page in PAGES:
        for match in FENCE.finditer(page.read_text(encoding="utf-8")):
            if match.group(1) == language:
                found.append((page, match.group(2)))
    return found


@pytest.mark.parametrize(
    "page,block", _blocks("bash"), ids=[str(p.relative_to(ROOT)) for p, _ in _blocks("bash")]
)
def test_every_bash_block_parses(page, block):
    checked = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize(
    "page,block", _blocks("python"), ids=[str(p.relative_to(ROOT)) for p, _ in _blocks("python")]
)
def test_every_python_block_compiles(page, block):
    ast.parse(block)


def test_the_readme_is_a_first_five_minutes():
    """About 200 lines at most: the rest has a page under docs/, linked from the README."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 220
    for page in (ROOT / "docs").glob("*.md"):
        assert f"docs/{page.name}" in readme, f"docs/{page.name} is not linked from the README"


def test_every_tracked_benchmark_output_is_cited():
    """``benchmarks/out/`` holds a benchmark's current figures (``<benchmark>.json`` or a chart of it,
    named as its RESULTS.md section's marker, or named in RESULTS.md or a page), and history under
    ``out/history/`` and ``out/before_after/``; nothing else."""
    listed = subprocess.run(
        ["git", "ls-files", "benchmarks/out"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    markers = set(re.findall(r"<!-- benchmark: (\S+) -->", results))
    cited = results + "".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    stray = []
    for name in listed:
        path = Path(name)
        if path.parts[2] in ("history", "before_after") or path.stem in markers or path.name in cited:
            continue
        stray.append(name)
    assert stray == []


USER_PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
#: What a lab notebook leaves in a page: a run's time of day, an issue number, a machine's scratch path.
#: Dated runs belong in benchmarks/RESULTS.md, the state of an issue in its tracker.
LAB_NOTES = re.compile(
    r"\b\d{1,2}:\d{2}(?:-\d{1,2}:\d{2})? UTC\b|\bruns? of \d|\bissues? #?\d+\b|/var/tmp/(?!mempalace-pg/)"
    r"|/work/|/root/",
    re.I,
)


@pytest.mark.parametrize("page", USER_PAGES, ids=_ids(USER_PAGES))
def test_user_pages_carry_no_lab_notes(page):
    found = [m.group(0) for m in LAB_NOTES.finditer(page.read_text(encoding="utf-8"))]
    assert found == []


def test_the_pages_count_mempalaces_mcp_tools_as_mempalace_does(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # MemPalace's server module reads its configuration
    from mempalace import mcp_server

    counted = set()
    for page in USER_PAGES:
        text = page.read_text(encoding="utf-8")
        counted |= {
            int(n) for n in re.findall(r"\b(\d+) (?:tools )?of MemPalace's (?:own )?(?:MCP )?server", text)
        }
    assert counted == {len(mcp_server.TOOLS)}
