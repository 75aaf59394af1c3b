"""The overview answers of a big palace come from what the triggers keep and from indexes, not from
reading every drawer: room_counts against a GROUP BY of the drawers after every kind of write, and a
page of ``mempalace_list_drawers`` against what MemPalace's own path returns (parity with Chroma: the
parity test)."""

from __future__ import annotations

import random

import pytest

from mempalace_pg.store.counts import grouped_counts
from mempalace_pg.store.listing import logical_page


def _scan(col) -> list[tuple]:
    """(room, wing, hall, n, last_date) computed from the drawers themselves, as MemPalace's Chroma
    reader groups them."""

    def spelled(v):
        if isinstance(v, bool) or v is None or isinstance(v, (list, dict)):
            return ""
        return str(v)

    groups: dict = {}
    for meta in col.get(include=["metadatas"]).metadatas:
        key = (spelled(meta.get("room")), spelled(meta.get("wing")), spelled(meta.get("hall")))
        n, last = groups.get(key, (0, ""))
        date = meta.get("date")
        groups[key] = (n + 1, max(last, date) if isinstance(date, str) else last)
    return sorted((*k, n, last) for k, (n, last) in groups.items())


def test_room_counts_follow_every_write(make_collection):
    col = make_collection()
    metas = [
        {"wing": "w", "room": "r", "hall": "h1", "date": "2026-01-02"},
        {"wing": "w", "room": "r", "hall": "h1", "date": "2026-03-04"},
        {"wing": "w", "room": "r", "hall": "h2", "date": "2025-12-31"},
        {"wing": "w", "room": 7, "date": "2026-05-01"},
        {"wing": "v", "room": "r"},
        {"room": "r", "hall": "h1", "date": 20260101},  # a number is not a date MemPalace compares
    ]
    col.add(
        ids=[f"d{i}" for i in range(len(metas))],
        documents=[f"doc {i}" for i in range(len(metas))],
        metadatas=metas,
        embeddings=[[1.0, float(i)] for i in range(len(metas))],
    )
    assert sorted(grouped_counts(col.partition)) == _scan(col)
    # the row holding a group's latest date goes: the next latest is read again
    col.delete(ids=["d1"])
    assert sorted(grouped_counts(col.partition)) == _scan(col)
    # an update that moves a row to another group, and one that lowers a date
    col.update(ids=["d0"], metadatas=[{"wing": "v", "room": "r", "date": "2027-01-01"}])
    col.update(ids=["d3"], metadatas=[{"wing": "w", "room": 7, "date": "2020-01-01"}])
    assert sorted(grouped_counts(col.partition)) == _scan(col)
    # an upsert that writes the same date again keeps it; one row re-written over many
    col.upsert(
        ids=["d2", "d9"],
        documents=["again", "new"],
        metadatas=[
            {"wing": "w", "room": "r", "hall": "h2", "date": "2025-12-31"},
            {"wing": "w", "room": "r"},
        ],
        embeddings=[[1.0, 0.5], [0.5, 1.0]],
    )
    assert sorted(grouped_counts(col.partition)) == _scan(col)
    col.delete(where={"wing": "v"})
    assert sorted(grouped_counts(col.partition)) == _scan(col)
    assert all(n > 0 for *_, n, _ in grouped_counts(col.partition))


def _parent(meta: dict):
    """The logical drawer a row is a chunk of, as MemPalace reads it (None for a drawer of its own)."""
    return next((meta[k] for k in ("parent_drawer_id", "parent_entry_id") if meta.get(k)), None)


def _reference_page(col, wing, room, limit, offset) -> tuple[list[str], int]:
    """The logical drawers MemPalace's tool_list_drawers pages through: every row in scope, a chunk
    standing for its parent drawer (parent_drawer_id, else parent_entry_id), sorted by id."""
    where = [{"wing": wing}] if wing else []
    where += [{"room": room}] if room else []
    got = col.get(
        where=(where[0] if len(where) == 1 else {"$and": where}) if where else None, include=["metadatas"]
    )
    keys = set()
    for rid, meta in zip(got.ids, got.metadatas):
        keys.add(_parent(meta) or rid)
    ordered = sorted(keys)
    page = ordered[offset : offset + limit]
    ids = [rid for rid, meta in zip(got.ids, got.metadatas) if rid in page or _parent(meta) in page]
    return sorted(ids), len(ordered)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_page_of_logical_drawers_is_the_page_mempalace_makes(make_collection, seed):
    rng = random.Random(seed)
    col = make_collection(f"listing{seed}")
    ids, metas = [], []
    for i in range(300):
        wing, room = f"w{rng.randrange(3)}", f"r{rng.randrange(4)}"
        ids.append(f"drawer_{rng.randrange(10**6):06d}_{i}")
        metas.append({"wing": wing, "room": room})
    # logical drawers of several chunks (both keys MemPalace writes), one with a legacy row of its own id
    for parent, key, count in (("drawer_500000_x", "parent_drawer_id", 3), ("diary_1", "parent_entry_id", 2)):
        for c in range(count):
            ids.append(f"{parent}_chunk{c}")
            metas.append({"wing": "w1", "room": "r1", key: parent, "chunk_index": c})
    ids.append("drawer_500000_x")
    metas.append({"wing": "w1", "room": "r1"})
    ids.append("unicode_é_z")
    metas.append({"wing": "w1", "room": "r1"})
    col.add(
        ids=ids,
        documents=[f"text {i}" for i in range(len(ids))],
        metadatas=metas,
        embeddings=[[1.0, float(i)] for i in range(len(ids))],
    )
    for wing, room in ((None, None), ("w1", None), ("w1", "r1"), (None, "r2"), ("none", None)):
        for limit, offset in ((20, 0), (7, 13), (50, 90), (10, 400)):
            page, total = logical_page(col.partition, wing=wing, room=room, limit=limit, offset=offset)
            assert (sorted(page), total) == _reference_page(col, wing, room, limit, offset), (wing, room)
