"""Every query of docs/sql-cookbook.md, run as written against a palace seeded to answer it.

The cookbook is psql input: its first block sets the search path and psql variables (``\\set``);
the others use them as ``:'name'``. Here each ``:'name'`` is sent as a bound parameter with the
cookbook's own value (what psql does by quoting it), the schema and graph names become the test
session's, and every query must return rows.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from pathlib import Path

import numpy as np
import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
COOKBOOK = ROOT / "docs" / "sql-cookbook.md"
BLOCK = re.compile(r"```sql\n(.*?)```", re.S)
SET = re.compile(r"^\\set (\w+) '(.*)'$")
VAR = re.compile(r":'(\w+)'")


def blocks():
    return BLOCK.findall(COOKBOOK.read_text(encoding="utf-8"))


def setup_block():
    first = blocks()[0]
    variables = dict(m.groups() for m in map(SET.match, first.splitlines()) if m)
    statements = [line for line in first.splitlines() if line and not line.startswith("\\")]
    return statements, variables


@pytest.fixture(scope="module")
def seeded(pg_dsn, pg_schema):
    """The palace the cookbook's variables name, with drawers, facts and a deleted drawer."""
    import os

    os.environ["MEMPALACE_PG_DSN"] = pg_dsn
    os.environ["MEMPALACE_PG_SCHEMA"] = pg_schema
    from mempalace_pg import unit_of_work

    _, v = setup_block()
    today = date.today().isoformat()
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(6, 8)).astype("float32")
    ids = [
        v["drawer"],
        "drawer_notes_alice_0002",
        "drawer_garden_0001",
        "drawer_garden_0002",
        "drawer_people_bob_0001",
        "drawer_to_delete",
    ]
    docs = [
        "Alice started the Garden Planner project in January.",
        "Alice and Bob met at the market.",
        "The basil in the garden needs water every morning.",
        "Garden plan: tomatoes, basil, mint.",
        "Bob introduced Carol to the team.",
        "A note that will be deleted.",
    ]
    metas = [
        {"wing": "notes", "room": "alice", "filed_at": "2026-01-05T10:00:00"},
        {"wing": "notes", "room": "alice", "filed_at": now},
        {"wing": "garden", "room": "herbs", "filed_at": now},
        {"wing": "garden", "room": "plans", "filed_at": "2026-02-01T09:00:00"},
        {"wing": "people", "room": "bob", "filed_at": now},
        {"wing": "notes", "room": "misc", "filed_at": now},
    ]
    with unit_of_work(palace_key=v["palace"]) as uow:
        uow.add_drawers(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
        uow.add_entity(v["subject"], "person")
        uow.add_triple(
            v["subject"], v["predicate"], v["object"], valid_from="2026-01-01", source_drawer_id=ids[0]
        )
        uow.add_triple("Alice", "knows", "Bob", valid_from=today, source_drawer_id=ids[1])
        uow.add_triple("Bob", "knows", "Carol", source_drawer_id=ids[4])
        uow.add_triple(
            "Alice", "grows", "Basil", valid_from="2025-04-01", valid_to="2025-10-01", source_drawer_id=ids[2]
        )
        uow.add_triple("Alice", "wrote", "A deleted note", source_drawer_id=ids[5])
    from mempalace_pg.atomic import open_drawers

    drawers = open_drawers(palace_key=v["palace"])[0]
    drawers.delete(ids=["drawer_to_delete"])
    # the common words as a count keeps them, with a threshold six drawers reach (the plugin's is 500)
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("SELECT {}(%s, 2)").format(
                psycopg.sql.Identifier(pg_schema, "remember_common_words")
            ),
            (drawers.partition.pk,),
        )
    return v


def run_block(conn, text, variables, schema):
    text = text.replace("'mempalace_kg'", f"'{schema}_kg'")
    statements = [s.strip() for s in re.split(r";\s*\n", text) if s.strip()]
    assert statements
    last = None
    for statement in statements:
        names = VAR.findall(statement)
        if names:
            last = conn.execute(
                VAR.sub(lambda m: f"%({m.group(1)})s", statement), {n: variables[n] for n in names}
            )
        else:
            last = conn.execute(statement.rstrip(";"))
    return last.fetchall()


def test_cookbook_has_the_queries_the_issue_asks_for():
    text = COOKBOOK.read_text(encoding="utf-8")
    for heading in (
        "What do I know about X?",
        "What changed in the last week?",
        "Which drawers support this fact?",
        "The nearest drawers to this drawer",
    ):
        assert f"## {heading}" in text
    assert len(blocks()) >= 12


# What the cookbook tells a role that is not a superuser to run instead of LOAD 'age' (AGE refuses that
# to such a role, preloaded or not: the application role `db bootstrap --app-role` makes, for one).
NON_SUPERUSER_LOAD = "LOAD '$libdir/plugins/age'"


def as_this_role_runs_it(conn, text: str) -> str:
    if conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]:
        return text
    cookbook = " ".join(COOKBOOK.read_text(encoding="utf-8").split())
    assert f"a non-superuser loads it as `{NON_SUPERUSER_LOAD}`" in cookbook
    return text.replace("LOAD 'age'", NON_SUPERUSER_LOAD)


@pytest.mark.parametrize("index", range(1, len(blocks())))
def test_cookbook_query_runs_and_answers(index, seeded, pg_dsn, pg_schema):
    setup, variables = setup_block()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for statement in setup:
            conn.execute(statement.replace("SET search_path = mempalace,", f"SET search_path = {pg_schema},"))
        rows = run_block(conn, as_this_role_runs_it(conn, blocks()[index]), variables, pg_schema)
    assert rows, f"cookbook query #{index} returned no rows on the seeded palace:\n{blocks()[index]}"


def test_cookbook_answers_are_the_right_ones(seeded, pg_dsn, pg_schema):
    setup, variables = setup_block()
    text = COOKBOOK.read_text(encoding="utf-8")

    def block_after(heading):
        section = text.split(f"## {heading}", 1)[1]
        return BLOCK.search(section).group(1)

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for statement in setup:
            conn.execute(statement.replace("SET search_path = mempalace,", f"SET search_path = {pg_schema},"))
        now_facts = run_block(
            conn, block_after("What do I know about X? (facts true now)"), variables, pg_schema
        )
        assert {(r[0], r[1], r[2]) for r in now_facts} == {
            ("Alice", "works_on", "Garden Planner"),
            ("Alice", "knows", "Bob"),
            ("Alice", "wrote", "A deleted note"),
        }
        then = run_block(conn, block_after("What was true about X on a given date?"), variables, pg_schema)
        assert {r[2] for r in then} == {"Garden Planner", "A deleted note"}  # knows Bob starts today
        hood = run_block(conn, block_after("Who is within two hops of X?"), variables, pg_schema)
        assert {(r[0], r[2]) for r in hood} >= {("Alice", 0), ("Bob", 1), ("Carol", 2)}
        support = run_block(conn, block_after("Which drawers support this fact?"), variables, pg_schema)
        assert [(r[0], r[1]) for r in support] == [("present", variables["drawer"])]
        near = run_block(conn, block_after("The nearest drawers to this drawer"), variables, pg_schema)
        assert len(near) == 4 and all(r[0] != variables["drawer"] for r in near)  # 5 drawers left
        assert [r[3] for r in near] == sorted(r[3] for r in near)


#: Other pages whose SQL a reader copies into psql: run as written, on the same seeded palace.
PAGES_WITH_SQL = [ROOT / "README.md", ROOT / "docs" / "psql.md"]


def _page_blocks():
    return [
        (page, i)
        for page in PAGES_WITH_SQL
        for i in range(len(BLOCK.findall(page.read_text(encoding="utf-8"))))
    ]


@pytest.mark.parametrize("page,index", _page_blocks(), ids=[f"{p.name}#{i}" for p, i in _page_blocks()])
def test_the_sql_other_pages_show_runs(page, index, seeded, pg_dsn, pg_schema):
    text = BLOCK.findall(page.read_text(encoding="utf-8"))[index]
    text = re.sub(r"\bmempalace\.", f"{pg_schema}.", text)
    text = text.replace("SET search_path = mempalace,", f"SET search_path = {pg_schema},")
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        run_block(conn, as_this_role_runs_it(conn, text), {}, pg_schema)
