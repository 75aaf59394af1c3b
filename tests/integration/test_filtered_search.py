"""A search filtered to a wing and a room walks the vector index when many records match and scans them
exactly when few do, whatever PostgreSQL guesses of the filter's share: the palace's many other wings and
rooms do not make it expect a handful of matches and sort them all (benchmarks/RESULTS.md, "Filtered
search at scale")."""

from __future__ import annotations

import json
import time

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from mempalace_pg.engine import nearest
from mempalace_pg.store.filters import wing_room_equalities

DIM = 16
WINGS, ROOMS, SMALL = 20, 10, 20  # 200 small rooms of 20 drawers
BIG = 4000  # and one room of 4,000, in wing w0


def palace_rows():
    """(ids, metadatas, vectors): the big room's drawers about one topic, the small rooms' about others."""
    rng = np.random.default_rng(5)
    topics = rng.normal(size=(8, DIM))
    ids, metas, vecs = [], [], []
    for w in range(WINGS):
        for r in range(ROOMS):
            for i in range(SMALL):
                ids.append(f"w{w}_r{r}_{i}")
                metas.append({"wing": f"w{w}", "room": f"r{r}"})
                vecs.append(topics[(w + r) % 8] + 0.5 * rng.normal(size=DIM))
    for i in range(BIG):
        ids.append(f"big_{i}")
        metas.append({"wing": "w0", "room": "big"})
        vecs.append(topics[i % 8] + 0.5 * rng.normal(size=DIM))
    order = rng.permutation(len(ids))  # written mixed, as palaces grow
    vecs = np.asarray(vecs, dtype=np.float32)
    return [ids[i] for i in order], [metas[i] for i in order], vecs[order]


def wait_for_one_segment(conn, schema: str, pk: int, rows: int, timeout: float = 120.0) -> str:
    """The name of the segment index that holds all ``rows``, once the folder has built it with the full
    options (a young one, built while the rows came, is rebuilt once they stop) and dropped the one it
    replaced: that one has the same predicate and stays GRACE_S after the switch, so until then the
    planner may walk either."""
    t0 = time.monotonic()
    while True:
        found = conn.execute(
            sql.SQL("SELECT index_name, rows, young FROM {} WHERE collection_pk = %s").format(
                sql.Identifier(schema, "vector_segments")
            ),
            (pk,),
        ).fetchall()
        graphs = conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = %s AND tablename = %s "
            "AND indexdef LIKE '%%USING hnsw%%'",
            (schema, f"records_c{int(pk)}"),
        ).fetchone()[0]
        if len(found) == 1 and found[0][1] == rows and not found[0][2] and graphs == 1:
            return found[0][0]
        assert time.monotonic() - t0 < timeout, f"no single segment after {timeout} s: {found}, {graphs} HNSW"
        time.sleep(0.2)


def plan_nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


def explained(conn, part, where: dict, q) -> dict:
    """The plan, run (EXPLAIN ANALYZE), of the statement query() runs for ``where`` near ``q`` (k=10)."""
    condition, params = part.condition(where)
    statement, params = nearest.nearest_sql(
        part.index,
        columns=sql.SQL("id"),
        condition=condition,
        params=params,
        n=10,
        dim=DIM,
        filtered=True,
        gate=nearest.wing_room_gate(part.index, wing_room_equalities(where)),
    )
    return conn.execute(
        sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) {}").format(statement), {**params, "q": q}, prepare=False
    ).fetchone()[0][0]["Plan"]


def test_a_big_room_is_walked_and_a_small_one_scanned(
    make_collection, pg_dsn, pg_schema, full_index_settings, monkeypatch
):
    # the big room (4,000 drawers) walks the one segment: below it, a filter is answered from its own
    # rows (their sign bits, then the exact distance)
    monkeypatch.setattr(nearest, "OWN_ROWS_PER_SEGMENT", 3000)
    col = make_collection("filtered")
    ids, metas, vecs = palace_rows()
    for s in range(0, len(ids), 1000):
        col.upsert(
            ids=ids[s : s + 1000],
            documents=[f"drawer {i}" for i in ids[s : s + 1000]],
            metadatas=metas[s : s + 1000],
            embeddings=vecs[s : s + 1000].tolist(),
        )
    part = col.partition
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        segment = wait_for_one_segment(conn, pg_schema, part.pk, len(ids))
        # the partition has the pair's statistics, and the folder's ANALYZE after its build fills them
        kinds = conn.execute(
            "SELECT stxkind FROM pg_statistic_ext WHERE stxname = %s AND stxnamespace = %s::regnamespace",
            (f"records_c{part.pk}_wing_room", pg_schema),
        ).fetchone()
        assert kinds and set(kinds[0]) == {"d", "f", "m"}
        t0 = time.monotonic()
        while not conn.execute(
            "SELECT n_distinct FROM pg_stats_ext WHERE statistics_name = %s AND statistics_schemaname = %s",
            (f"records_c{part.pk}_wing_room", pg_schema),
        ).fetchone():
            assert time.monotonic() - t0 < 60, "the folder never analyzed the table"
            time.sleep(0.2)
        btree = (
            conn.execute(
                "SELECT i.indexrelid::regclass::text FROM pg_index i WHERE i.indrelid = %s::regclass "
                'AND pg_get_indexdef(i.indexrelid) LIKE \'%%"left"(wing, 256), "left"(room, 256)%%\'',
                (f"{pg_schema}.records_c{part.pk}",),
            )
            .fetchone()[0]
            .split(".")[-1]
        )

        # query() itself, called often enough that a prepared statement would have gone to a generic
        # plan on every pooled connection (psycopg prepares at a connection's 6th call, PostgreSQL plans
        # generically from the 6th execution): every call walked the segment, none read the wing/room
        # index.
        def scans(index: str) -> int:
            return conn.execute(
                "SELECT idx_scan FROM pg_stat_user_indexes WHERE schemaname = %s AND indexrelname = %s",
                (pg_schema, index),
            ).fetchone()[0]

        big = {"$and": [{"wing": "w0"}, {"room": "big"}]}
        before = {index: scans(index) for index in (segment, btree)}
        calls = 120
        for i in range(calls):
            col.query(query_embeddings=[vecs[ids.index(f"big_{i}")].tolist()], n_results=10, where=big)
        t0 = time.monotonic()
        # the pool's sessions report their counts once idle for a while (up to 10 s)
        while scans(segment) - before[segment] < calls and time.monotonic() - t0 < 60:
            time.sleep(0.5)
            conn.execute("SELECT pg_stat_clear_snapshot()")
        walks, index_reads = scans(segment) - before[segment], scans(btree) - before[btree]
        assert (walks, index_reads) == (calls, 0)

        # The statement query() runs, explained: which arms ran, and through which index.
        register_vector(conn)
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        conn.execute("SET max_parallel_workers_per_gather = 0")
        q = vecs[ids.index("big_7")]
        for where, walked in (
            ({"$and": [{"wing": "w0"}, {"room": "big"}]}, True),  # 4,000 match: walk
            ({"$and": [{"wing": "w3"}, {"room": "r4"}]}, False),  # 20 match: their own rows
        ):
            ran = {
                node.get("Index Name")
                for node in plan_nodes(explained(conn, part, where, q))
                if node.get("Actual Loops", 0) > 0 and node.get("Index Name")
            }
            if walked:
                assert segment in ran and btree not in ran and "vector_bits_wing_room" not in ran, (
                    where,
                    ran,
                )
            else:
                assert "vector_bits_wing_room" in ran and segment not in ran, (where, ran)
            # and query() answers from the filter's records, the nearest first
            got = col.query(query_embeddings=[q.tolist()], n_results=10, where=where, include=["metadatas"])
            want = {(m["wing"], m["room"]) for m in [json.loads(json.dumps(m)) for m in got.metadatas[0]]}
            wing, room = where["$and"][0]["wing"], where["$and"][1]["room"]
            assert len(got.ids[0]) == 10 and want == {(wing, room)}


def test_search_sessions_never_compile_or_parallelize(make_collection):
    """A search statement counts its exact-scan arm as a scan of the whole partition even when a one-time
    filter skips it, so in a large palace its cost crosses jit_above_cost (and the parallel thresholds):
    every call then compiled some 300 functions first, seconds a query at 1M drawers (benchmarks/
    RESULTS.md, "A big palace on the real write path"). The plugin's sessions run neither."""
    col = make_collection()
    col.upsert(ids=["a"], documents=["a"], metadatas=[{"wing": "w"}], embeddings=[[1.0, 0.0, 0.0]])
    with col.partition.db.connection() as conn:
        settings = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings "
                "WHERE name IN ('jit', 'max_parallel_workers_per_gather')"
            ).fetchall()
        )
    assert settings == {"jit": "off", "max_parallel_workers_per_gather": "0"}


def test_a_filters_own_rows_are_read_from_the_index_alone(make_collection, pg_dsn, pg_schema):
    """The first pass over a small filter's own rows is an index-only scan of vector_bits_wing_room,
    which carries each row's wing, room, vector_seq and sign bits (sql/0019): no block of vector_bits
    itself is read, the reads a cold server spends most of such a search on. A bulk load leaves the
    table's pages all-visible, which an index-only scan needs."""
    col = make_collection("covered")
    ids, metas, vecs = palace_rows()
    with col.bulk_load() as load:
        load(ids=ids, documents=[f"drawer {i}" for i in ids], metadatas=metas, embeddings=vecs.tolist())
    part = col.partition
    where = {"$and": [{"wing": "w3"}, {"room": "r4"}]}  # 20 match: their own rows
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        register_vector(conn)
        plan = explained(conn, part, where, vecs[ids.index("w3_r4_0")])
    passes = [
        (node["Node Type"], node.get("Heap Fetches"), node.get("Actual Rows"))
        for node in plan_nodes(plan)
        if node.get("Index Name") == "vector_bits_wing_room" and node.get("Actual Loops", 0) > 0
    ]
    assert passes == [("Index Only Scan", 0, 20)], passes


def test_a_long_wing_is_searched_by_its_whole_value(make_collection):
    """vector_bits keeps a wing's and room's first 256 characters (sql/0019): two wings alike in those
    and different after them share their sign bits' entries, and a search in one returns its own
    drawers only, the exact nearest."""
    col = make_collection("long")
    rng = np.random.default_rng(11)
    wings = ("w" * 300, "w" * 299 + "x")
    vecs = rng.normal(size=(40, DIM)).astype(np.float32)
    metas = [{"wing": wings[i % 2], "room": "r"} for i in range(40)]
    ids = [f"d{i}" for i in range(40)]
    col.upsert(ids=ids, documents=[f"drawer {i}" for i in ids], metadatas=metas, embeddings=vecs.tolist())
    q = rng.normal(size=DIM).astype(np.float32)
    own = [i for i in range(40) if i % 2 == 0]
    cos = [float(vecs[i] @ q / np.linalg.norm(vecs[i]) / np.linalg.norm(q)) for i in own]
    want = [ids[own[j]] for j in np.argsort(cos)[::-1][:5]]
    for where in ({"wing": wings[0]}, {"$and": [{"wing": wings[0]}, {"room": "r"}]}):
        got = col.query(query_embeddings=[q.tolist()], n_results=5, where=where)
        assert got.ids[0] == want, (where, got.ids[0], want)
