"""A caller's Settings arrive whole: the drawers' queries and the graph beside them run with the
caller's search breadth, statement timeout and pool size, not with the environment's, and a second
caller in the same process with other values gets its own (mempalace_pg.db.pool says which settings
are kept per process)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from mempalace.backends import PalaceRef

from mempalace_pg.atomic import open_drawers
from mempalace_pg.config import Settings
from mempalace_pg.errors import StatementTimeoutError
from mempalace_pg.store.backend import PostgresBackend
from mempalace_pg.store.partition import DRAWERS_COLLECTION


def _in_effect(collection) -> tuple[str, str]:
    """hnsw.ef_search and statement_timeout on the connections the collection's queries run on."""
    return collection.database().run(
        lambda conn: conn.execute(
            "SELECT current_setting('hnsw.ef_search'), current_setting('statement_timeout')"
        ).fetchone()
    )


def test_a_callers_settings_reach_the_drawers_and_the_graph(tmp_path):
    base = Settings.load()
    mine = replace(base, ef_search=77, pool_max_size=3, statement_timeout_ms=12_345)
    assert mine != base
    palace = str(tmp_path / "palace")
    PostgresBackend().open_collection(
        mine, palace=PalaceRef(id=palace, local_path=palace), collection_name=DRAWERS_COLLECTION, create=True
    )

    drawers, kg = open_drawers(palace, settings=mine)

    assert drawers.settings == mine and kg.settings == mine
    assert _in_effect(drawers) == ("77", "12345ms")
    assert drawers.database().pool.max_size == 3
    assert kg.database() is drawers.database()  # one pool, one transaction for both
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((5, 384)).astype(np.float32)
    drawers.upsert(
        ids=[f"d{i}" for i in range(5)],
        documents=[f"drawer {i}" for i in range(5)],
        embeddings=vectors.tolist(),
        metadatas=[{"wing": "w", "room": "r"}] * 5,
    )
    found = drawers.query(query_embeddings=[vectors[3].tolist()], n_results=1)
    assert found.ids == [["d3"]]
    assert _in_effect(drawers) == ("77", "12345ms")  # the query left the caller's breadth in place

    # another caller in the same process, other values: its own, and the first keeps its own
    other = replace(mine, ef_search=33, pool_max_size=2, statement_timeout_ms=200)
    drawers2, _kg2 = open_drawers(palace, settings=other)
    assert _in_effect(drawers2) == ("33", "200ms")
    assert drawers2.database().pool.max_size == 2
    assert _in_effect(drawers) == ("77", "12345ms")
    assert drawers2.count() == 5

    # the statement timeout is the caller's in earnest: a statement longer than it is cancelled, and the
    # caller is told so by the plugin, with the setting to change (never the driver's QueryCanceled)
    with pytest.raises(StatementTimeoutError, match="MEMPALACE_PG_STATEMENT_TIMEOUT_MS = 200 ms"):
        drawers2.database().run(lambda conn: conn.execute("SELECT pg_sleep(1)"))
