"""The overview answers of a big palace come from what the triggers keep and from indexes, not from
reading every drawer: room_counts against a GROUP BY of the drawers after every kind of write, and a
page of ``mempalace_list_drawers`` against what MemPalace's own path returns (parity with Chroma: the
parity test)."""

from __future__ import annotations

import json
import random

import pytest
from psycopg import sql

from mempalace_pg.store.counts import grouped_counts
from mempalace_pg.store.listing import logical_page, page_statement
from tests.integration.test_filtered_search import plan_nodes


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


def listing_keys_and_records(col) -> tuple[list, list]:
    """listing_keys' entries of the collection, and what they should be, computed from its records."""
    db = col.partition.db

    def read(conn):
        kept = conn.execute(
            sql.SQL(
                "SELECT id_key, wing_head, room_head FROM {} WHERE collection_pk = %s ORDER BY id_key"
            ).format(db.ident("listing_keys")),
            (col.partition.pk,),
        ).fetchall()
        wanted = conn.execute(
            sql.SQL(
                "SELECT {}(id), left(wing, 256), left(room, 256) FROM {} WHERE collection_pk = %s ORDER BY 1"
            ).format(db.ident("text_key"), col.partition.table),
            (col.partition.pk,),
        ).fetchall()
        return kept, wanted

    return db.run(read)


def test_listing_keys_follow_every_write_and_long_values_stay_exact(make_collection):
    col = make_collection("listing_keys")
    long_wing = "w" * 300
    twin_wing = "w" * 256 + "x" * 44  # the same first 256 characters as long_wing
    ids = [f"d{i:03d}" for i in range(60)]
    metas = [{"wing": (long_wing, twin_wing, "short")[i % 3], "room": f"r{i % 2}"} for i in range(60)]
    metas[5] = {"room": "r0"}  # no wing at all
    metas[6] = {"wing": 7, "room": "r0"}  # a wing that is not a string
    col.add(
        ids=ids,
        documents=[f"text {i}" for i in range(60)],
        metadatas=metas,
        embeddings=[[1.0, float(i)] for i in range(60)],
    )
    kept, wanted = listing_keys_and_records(col)
    assert kept == wanted and len(kept) == 60
    # an upsert that moves rows to another wing, one that keeps them, an update of a room, deletes
    col.upsert(
        ids=["d000", "d001", "d100"],
        documents=["a", "b", "c"],
        metadatas=[{"wing": "short", "room": "r9"}, metas[1], {"wing": long_wing, "room": "r1"}],
        embeddings=[[0.5, 1.0]] * 3,
    )
    col.update(ids=["d002"], metadatas=[{"wing": twin_wing, "room": "moved"}])
    col.delete(ids=["d003", "d004"])
    col.delete(where={"room": "r9"})
    kept, wanted = listing_keys_and_records(col)
    assert kept == wanted and len(kept) == 58
    # a long wing is compared whole: its twin with the same head is not in its pages
    for wing, room in ((long_wing, None), (twin_wing, "r1"), ("short", None), (None, "r0")):
        for limit, offset in ((5, 0), (7, 3), (50, 10)):
            page, total = logical_page(col.partition, wing=wing, room=room, limit=limit, offset=offset)
            assert (sorted(page), total) == _reference_page(col, wing, room, limit, offset), (wing, room)


@pytest.mark.parametrize(
    "wing, room, index",
    [
        (None, None, "listing_keys_key"),
        ("w1", None, "listing_keys_wing"),
        ("w1", "r1", "listing_keys_wing_room"),
        (None, "r2", "listing_keys_room"),
    ],
)
def test_a_deep_page_skips_index_entries_not_drawers(make_collection, wing, room, index):
    """The ids a page skips come from listing_keys by an index-only scan: no records row is read for
    them (the records partition is read only for the page's own rows and the chunk rows)."""
    col = make_collection(f"deep_{index}")
    n = 2000
    col.add(
        ids=[f"drawer_{i:05d}" for i in range(n)],
        documents=[f"text {i}" for i in range(n)],
        metadatas=[{"wing": f"w{i % 2}", "room": f"r{i % 3}"} for i in range(n)],
        embeddings=[[1.0, float(i)] for i in range(n)],
    )
    db = col.partition.db
    with db.session("the test's VACUUM") as conn:  # as autovacuum leaves them: statistics, visibility map
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(db.ident("listing_keys")))
        conn.execute(sql.SQL("ANALYZE {}").format(col.partition.table))
    query, params = page_statement(col.partition, wing=wing, room=room, limit=20, offset=300)

    def explain(conn):
        conn.execute("SET LOCAL enable_seqscan = off")
        return conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + query, params).fetchone()[0]

    plan = db.run(explain, atomic=True)
    scans = [p for p in plan_nodes(plan[0]["Plan"]) if p.get("Index Name") == index]
    assert scans and all(p["Node Type"] == "Index Only Scan" for p in scans), json.dumps(plan)[:2000]
    assert sum(p["Actual Rows"] for p in scans) >= 320
    # every records row the statement read, kept or filtered out: the page's own 20, looked up by key
    read = sum(
        (p["Actual Rows"] + p.get("Rows Removed by Filter", 0)) * p["Actual Loops"]
        for p in plan_nodes(plan[0]["Plan"])
        if p.get("Relation Name", "").startswith("records")
    )
    assert read <= 40, json.dumps(plan)[:3000]
    page, total = logical_page(col.partition, wing=wing, room=room, limit=20, offset=300)
    assert (sorted(page), total) == _reference_page(col, wing, room, 20, 300)
