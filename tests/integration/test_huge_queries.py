"""A search of any length answers, or refuses with the plugin's error, within the statement timeout: queries
of 100,000 to 1,000,000 characters (a pasted log, a page of text) in every entry that takes query text,
and a statement timeout anywhere reaches the caller as StatementTimeoutError naming the setting to change,
never as the driver's QueryCanceled."""

from __future__ import annotations

import random
import string
import time
import uuid
from dataclasses import replace

import numpy as np
import psycopg
import pytest
from mempalace.backends import PalaceRef

from mempalace_pg import PalaceSearch
from mempalace_pg.atomic import open_drawers
from mempalace_pg.config import Settings
from mempalace_pg.errors import StatementTimeoutError
from mempalace_pg.store.backend import PostgresBackend
from mempalace_pg.store.partition import DRAWERS_COLLECTION
from tests.run_cli import run_cli

_rng = random.Random(49)
WORDS = ["".join(_rng.choice(string.ascii_lowercase) for _ in range(_rng.randint(3, 9))) for _ in range(5000)]
DIM = 8


def huge(chars: int) -> str:
    """Text of ``chars`` characters: thousands of distinct words, some of them the palace's."""
    return " ".join(_rng.choice(WORDS) for _ in range(chars // 6 + 1))[:chars]


@pytest.fixture(scope="module")
def palace(pg_env_module):
    key = f"huge-{uuid.uuid4().hex[:8]}"
    drawers, kg = open_drawers(palace_key=key)
    rng = np.random.default_rng(49)
    n = 2000
    drawers.add(
        ids=[f"d{i}" for i in range(n)],
        documents=[" ".join(_rng.choice(WORDS) for _ in range(40)) for _ in range(n)],
        metadatas=[{"wing": f"w{i % 3}", "room": f"r{i % 7}"} for i in range(n)],
        embeddings=rng.normal(size=(n, DIM)).astype("float32").tolist(),
    )
    for i in range(50):
        kg.add_triple(f"Entity {i}", "knows", f"Entity {i + 1}", source_drawer_id=f"d{i}")
    return {"key": key, "drawers": drawers, "kg": kg}


@pytest.fixture(scope="module")
def pg_env_module(pg_dsn, pg_schema):
    """The module's palace lives past a test: the settings in the environment for its whole life."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MEMPALACE_PG_DSN", pg_dsn)
    mp.setenv("MEMPALACE_PG_SCHEMA", pg_schema)
    yield
    mp.undo()


def _answers(call):
    """``call()`` answers; a refusal is the plugin's error (a BackendError or ValueError), never the
    driver's or a codec's."""
    try:
        return call()
    except (psycopg.Error, UnicodeError) as exc:
        pytest.fail(f"raw driver/codec error: {type(exc).__name__}: {exc}")


@pytest.mark.parametrize("chars", [100_000, 300_000, 1_000_000])
def test_every_search_entry_answers_a_huge_query(palace, chars):
    text = huge(chars)
    q = [0.1] * DIM
    drawers, kg = palace["drawers"], palace["kg"]
    search = PalaceSearch(palace_key=palace["key"])
    chroma_mode = PostgresBackend().open_collection(
        replace(Settings.load(), lexical="chroma"),
        palace=PalaceRef(id=palace["key"]),
        collection_name=DRAWERS_COLLECTION,
    )
    started = time.monotonic()
    assert _answers(lambda: drawers.lexical_search(query=text, n_results=5)).hits
    _answers(lambda: drawers.lexical_search(query=text, n_results=5, where={"wing": "w1"}))
    _answers(lambda: chroma_mode.lexical_search(query=text, n_results=5))
    assert _answers(lambda: search.hybrid(text, q, n_results=5))
    _answers(lambda: search.hybrid(text, q, n_results=5, wing="w2", room="r3"))
    _answers(lambda: search.entities_for_query(q, query_text=text))
    _answers(lambda: search.around_entity(text, q, hops=2))  # an entity name of any length: not found
    _answers(lambda: kg.query_entity(text))
    _answers(lambda: drawers.get(where_document={"$contains": text[:5000]}, include=[]))
    # far within the statement timeout (60 s): the words a query may use are bounded
    assert time.monotonic() - started < 30


def test_the_cli_answers_a_huge_query(palace, pg_dsn, pg_schema):
    # 100,000 characters: an argument cannot be much longer (Linux's MAX_ARG_STRLEN is 128 kB)
    out = run_cli(
        "--dsn",
        pg_dsn,
        "--schema",
        pg_schema,
        "search",
        "hybrid",
        huge(100_000),
        "--palace-key",
        palace["key"],
        "--json",
    )
    assert out.returncode in (0, 2), out.stderr
    assert "psycopg" not in out.stderr and "Traceback" not in out.stderr, out.stderr[-2000:]


def test_a_statement_timeout_reaches_the_caller_as_the_plugins_error(palace, pg_dsn, pg_schema):
    # 500 ms: opening the palace takes a few; every statement through the plugin runs in Database.run,
    # on a pooled connection or inside a held transaction, the two ways a cancel can reach a caller
    settings = replace(Settings.load(), statement_timeout_ms=500)
    drawers, _ = open_drawers(palace_key=palace["key"], settings=settings)
    db = drawers.database()
    with pytest.raises(StatementTimeoutError, match="MEMPALACE_PG_STATEMENT_TIMEOUT_MS = 500 ms"):
        db.run(lambda conn: conn.execute("SELECT pg_sleep(2)"))
    with pytest.raises(StatementTimeoutError, match="MEMPALACE_PG_STATEMENT_TIMEOUT_MS = 500 ms"):
        with db.held():
            db.run(lambda conn: conn.execute("SELECT pg_sleep(2)"))
    assert drawers.count() == 2000  # the pool's connections still work
