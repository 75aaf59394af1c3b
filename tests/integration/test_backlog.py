"""Back-pressure: a writer waits for the folder while more than BACKLOG_ROWS rows wait for the vector index,
never for good, and never where no folder can run."""

from __future__ import annotations

import logging
import time

import numpy as np

from mempalace_pg.engine import backlog, indexing


def write(col, start: int, n: int, rng) -> float:
    """Upsert drawers start..start+n in one batch; the seconds the call took."""
    vecs = rng.normal(size=(n, 64)).astype("float32")
    t0 = time.monotonic()
    col.upsert(
        ids=[f"d{i}" for i in range(start, start + n)],
        documents=[f"drawer {i}" for i in range(start, start + n)],
        metadatas=[{"wing": "w"}] * n,
        embeddings=vecs.tolist(),
    )
    return time.monotonic() - t0


def test_a_writer_waits_for_the_folder_and_never_for_good(make_collection, monkeypatch, caplog):
    monkeypatch.setattr(indexing, "BACKLOG_ROWS", 500)
    monkeypatch.setattr(backlog, "CHECK_ROWS", 100)
    monkeypatch.setattr(backlog, "MAX_WAIT_S", 1.5)
    rng = np.random.default_rng(5)
    col = make_collection()
    part = col.partition
    assert write(col, 0, 200, rng) < 1.5  # 200 waiting: under the limit

    # The segments held (as a bulk load does): no folder can fold, so the write past the limit waits
    # MAX_WAIT_S, says so, and writes on.
    held = part.index.pause()
    try:
        with caplog.at_level(logging.WARNING, logger="mempalace_pg.engine.backlog"):
            took = write(col, 200, 600, rng)
        assert took >= 1.5
        assert any("wait for the vector index" in r.getMessage() for r in caplog.records), caplog.text
        assert backlog.rows_waiting(part.index, 10_000) >= 600
    finally:
        held.close()

    # Released: the next write waits until the folder has folded the tail, then returns.
    monkeypatch.setattr(backlog, "MAX_WAIT_S", 60.0)
    took = write(col, 800, 200, rng)
    assert took < 60.0
    assert backlog.rows_waiting(part.index, 10_000) <= 500
    assert part.index.layout(fresh=True, start_folder=True).segments, "the folder built no segment"


def test_no_writer_waits_where_no_folder_runs(make_collection, monkeypatch):
    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")
    monkeypatch.setattr(indexing, "BACKLOG_ROWS", 500)
    monkeypatch.setattr(backlog, "CHECK_ROWS", 100)
    monkeypatch.setattr(backlog, "MAX_WAIT_S", 5.0)
    rng = np.random.default_rng(6)
    col = make_collection()
    took = sum(write(col, start, 500, rng) for start in range(0, 3000, 500))
    assert took < 5.0
    assert backlog.rows_waiting(col.partition.index, 10_000) == 3000  # nothing folded, nobody waited
