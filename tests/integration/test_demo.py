"""The README's first command, `bash scripts/demo.sh`, run as a newcomer runs it: against a database made
for this run (nothing an earlier run or another test created: no extension, no schema, no graph), and its
output checked against the excerpts the README shows.

A demo that only passed on a used server once went unnoticed for a whole issue; this test is why that
cannot happen again.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import uuid
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ROOT = Path(__file__).resolve().parents[2]


def readme_excerpts() -> list[list[str]]:
    """The ```text blocks of the README's section on the two commands: what the demo prints."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```text\n(.*?)```", section, flags=re.S)
    assert blocks, "the README's section on the two commands shows no demo output"
    return [block.rstrip("\n").split("\n") for block in blocks]


def line_pattern(line: str) -> re.Pattern:
    """An excerpt line as a pattern: '…' stands for text the README shortened (an id, the end of a line)."""
    return re.compile(".*?".join(re.escape(part) for part in line.rstrip().split("…")))


def missing_lines(excerpt: list[str], output: list[str]) -> list[str]:
    """The excerpt's lines that the output lacks, in order ('...' lines stand for lines left out)."""
    at, missing = 0, []
    for line in excerpt:
        if line.strip() == "...":
            continue
        pattern = line_pattern(line)
        for i in range(at, len(output)):
            if pattern.fullmatch(output[i].rstrip()):
                at = i + 1
                break
        else:
            missing.append(line)
    return missing


def test_the_demo_passes_on_a_new_database_and_prints_what_the_readme_shows(pg_admin_dsn):
    database = f"demo_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMPALACE_PG_", "MEMPALACE_CONFIG"))}
        env["MEMPALACE_PG_TEST_DSN"] = make_conninfo(**{**conninfo_to_dict(pg_admin_dsn), "dbname": database})
        # The demo works in /tmp/mempalace-pg-demo, whose path the README's drawer ids come from; the
        # stacks' tiers run side by side (scripts/test.sh), each with this test: one at a time.
        with open("/tmp/mempalace-pg-demo.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            run = subprocess.run(
                ["bash", str(ROOT / "scripts" / "demo.sh")],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=600,
            )
        output = run.stdout.splitlines()
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        for excerpt in readme_excerpts():
            assert not missing_lines(excerpt, output), (missing_lines(excerpt, output), run.stdout)
        with psycopg.connect(env["MEMPALACE_PG_TEST_DSN"]) as conn:  # it made what it needed, here
            assert conn.execute("SELECT count(*) FROM demo.drawers").fetchone()[0] >= 8
            extensions = conn.execute(
                "SELECT array_agg(extname ORDER BY extname) FROM pg_extension "
                "WHERE extname IN ('age', 'vector')"
            )
            assert extensions.fetchone()[0] == ["age", "vector"]
    finally:
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


def test_excerpt_matching_reads_ellipses_as_the_readme_means_them():
    output = ["== a", "x", " 1.* drawer_abc123  similarity 0.4  # Power and the UPS The rest", "[… → now]"]
    assert missing_lines([" 1.* drawer_ab…  similarity 0.4  # Power and …", "[… → now]"], output) == []
    assert missing_lines(["== a", "...", "[… → now]"], output) == []
    assert missing_lines(["[… → now]", "== a"], output) == ["== a"]  # in order
    assert missing_lines(["similarity 0.5"], output) == ["similarity 0.5"]
