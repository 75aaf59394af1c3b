"""`mempalace-pg migrate`: a Chroma (and sqlite_exact) palace with its SQLite graph into PostgreSQL,
read through MemPalace's own backends, without re-embedding."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np

N = 3000


def make_source(path: Path, backend_name: str = "chroma", n: int = N, model: str | None = "model-a"):
    from mempalace.backends import PalaceRef
    from mempalace.backends.base import EmbedderIdentity
    from mempalace.backends.registry import get_backend_class

    from mempalace_pg.graph.routing import sqlite_class

    backend = get_backend_class(backend_name)()
    ref = PalaceRef(id=str(path), local_path=str(path))
    drawers = backend.get_collection(palace=ref, collection_name="mempalace_drawers", create=True)
    vecs = np.random.default_rng(11).normal(size=(n, 16)).astype("float32")
    for s in range(0, n, 500):
        e = min(n, s + 500)
        drawers.add(
            ids=[f"drawer_{i:05d}" for i in range(s, e)],
            documents=[f'note {i}: ünïcode "q"' for i in range(s, e)],
            metadatas=[
                {"wing": f"w{i % 3}", "room": "r", "chunk_index": i % 7, "filed_at": "2026-01-01T00:00:00"}
                for i in range(s, e)
            ],
            embeddings=vecs[s:e].tolist(),
        )
    if model:
        drawers.set_embedder_identity(EmbedderIdentity(model_name=model, dimension=16))
    closets = backend.get_collection(palace=ref, collection_name="mempalace_closets", create=True)
    closets.add(
        ids=["closet_1"], documents=["closet text"], metadatas=[{"wing": "w0"}], embeddings=[vecs[0].tolist()]
    )
    backend.close()
    kg = sqlite_class()(str(path / "knowledge_graph.sqlite3"))
    kg.add_triple("Alice", "wrote", "note 1", valid_from="2026-01-01", source_drawer_id="drawer_00001")
    kg.add_triple("Alice", "lives_in", "Porto", valid_from="2020-01-01", valid_to="2025-12-31")
    kg.close()
    return vecs


def tree_digest(path: Path) -> dict:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def run(*args, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", "mempalace_pg.cli", "migrate", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_migrate_chroma_palace(pg_env, tmp_path):
    from mempalace_pg.atomic import open_drawers
    from mempalace_pg.graph.routing import sqlite_class

    src, dst = tmp_path / "chroma_palace", tmp_path / "pg_palace"
    vecs = make_source(src)
    before = tree_digest(src)
    dry = json.loads(run("--from", str(src), "--to", str(dst), "--dry-run", "--json").stdout)
    assert dry["source_backend"] == "chroma" and dry["collections"]["mempalace_drawers"]["source"] == N
    assert not dst.exists()  # a dry run writes nothing
    out = run("--from", str(src), "--to", str(dst)).stdout
    assert "Switch MemPalace over" in out and f"--palace {dst}" in out and "identical" in out
    assert tree_digest(src) == before  # the source is untouched, byte for byte
    drawers, kg = open_drawers(str(dst), create=False)
    assert drawers.count() == N and drawers.get_stored_embedder_identity().model_name == "model-a"
    got = drawers.get(ids=["drawer_00042"], include=["documents", "metadatas", "embeddings"])
    assert got.documents == ['note 42: ünïcode "q"'] and got.metadatas[0]["chunk_index"] == 0
    assert np.allclose(
        np.asarray(got.embeddings[0]), vecs[42], atol=1e-6
    )  # the stored vector: no re-embedding
    q = vecs[7] / np.linalg.norm(vecs[7])
    assert drawers.query(query_embeddings=[q.tolist()], n_results=1).ids == [["drawer_00007"]]
    ref = sqlite_class()(str(src / "knowledge_graph.sqlite3"))
    try:
        assert kg.query_entity("Alice", direction="both") == ref.query_entity("Alice", direction="both")
    finally:
        ref.close()
    # twice: nothing new is written
    again = json.loads(run("--from", str(src), "--to", str(dst), "--json").stdout)
    assert again["reader"] == {
        "mempalace_drawers": "files",
        "mempalace_closets": "files",
    }  # not Chroma's reader
    assert again["ok"] and again["collections"]["mempalace_drawers"]["written"] == 0
    assert again["collections"]["mempalace_drawers"]["skipped"] == N
    assert again["graph"]["written"]["triples"]["inserted"] == 0


def test_migrate_falls_back_to_chromas_reader_for_a_layout_it_does_not_know(pg_env, tmp_path, monkeypatch):
    from mempalace_pg.atomic import open_drawers
    from mempalace_pg.tools import chroma_files
    from mempalace_pg.tools.migrate import migrate

    def unknown_layout(self, name):  # as for a palace written by a Chroma whose files it cannot read
        raise chroma_files.ChromaFormatError("a layout from another Chroma")

    monkeypatch.setattr(chroma_files.ChromaPalaceFiles, "collection", unknown_layout)
    src, dst = tmp_path / "chroma_palace", tmp_path / "pg_palace"
    vecs = make_source(src)
    report = migrate(str(src), str(dst)).as_dict()
    assert (
        report["ok"]
        and report["reader"]["mempalace_drawers"] == "chroma (its files: a layout from another Chroma)"
    )
    drawers, _kg = open_drawers(str(dst), create=False)
    got = drawers.get(ids=["drawer_00042"], include=["embeddings"])
    assert drawers.count() == N and np.allclose(np.asarray(got.embeddings[0]), vecs[42], atol=1e-6)


def test_migrate_interrupted_half_way_then_rerun(pg_env, tmp_path):
    from mempalace_pg.atomic import open_drawers

    src, dst = tmp_path / "chroma_palace", tmp_path / "pg_palace"
    make_source(src, n=6000)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mempalace_pg.cli",
            "migrate",
            "--from",
            str(src),
            "--to",
            str(dst),
            "--batch",
            "200",
            "--progress",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ),
    )
    seen = ""
    deadline = time.time() + 300
    while time.time() < deadline:
        chunk = proc.stderr.read(64)
        if not chunk:
            break
        seen += chunk
        if "2," in seen.split("mempalace_drawers")[-1] and "/6,000" in seen:  # about a third of the way
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, seen[-500:]
    drawers, _ = open_drawers(str(dst), create=False)
    partial = drawers.count()
    assert 0 < partial < 6000
    report = json.loads(run("--from", str(src), "--to", str(dst), "--json").stdout)
    assert report["ok"] and report["collections"]["mempalace_drawers"]["target"] == 6000
    assert (
        report["collections"]["mempalace_drawers"]["skipped"] >= partial - 400
    )  # in-flight batches may repeat
    assert drawers.count() == 6000 and drawers.maintenance_state()["vector_index_valid"]


def test_migrate_refusals(pg_env, tmp_path):
    from mempalace.backends.base import EmbedderIdentity

    src = tmp_path / "chroma_palace"
    make_source(src, n=600)
    # a target that already holds another palace
    other = tmp_path / "other"
    from mempalace.backends import PalaceRef

    from mempalace_pg.store.backend import PostgresBackend

    target = PostgresBackend().get_collection(
        palace=PalaceRef(id=str(other), local_path=str(other)),
        collection_name="mempalace_drawers",
        create=True,
    )
    target.add(ids=["mine"], documents=["not from the source"], embeddings=[[1.0] * 16])
    proc = run("--from", str(src), "--to", str(other), check=False)
    assert proc.returncode == 2 and "refusing to mix palaces" in proc.stderr
    # a target written by another embedder
    third = tmp_path / "third"
    t3 = PostgresBackend().get_collection(
        palace=PalaceRef(id=str(third), local_path=str(third)),
        collection_name="mempalace_drawers",
        create=True,
    )
    t3.set_embedder_identity(EmbedderIdentity(model_name="model-b", dimension=16))
    proc = run("--from", str(src), "--to", str(third), check=False)
    assert proc.returncode == 2 and "model-b" in proc.stderr and "model-a" in proc.stderr
    assert t3.count() == 0
    # not a palace at all; a non-empty directory that is no palace
    proc = run("--from", str(tmp_path / "nothing"), "--to", str(tmp_path / "x"), check=False)
    assert proc.returncode == 2 and "no MemPalace palace" in proc.stderr
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "file.txt").write_text("x")
    proc = run("--from", str(src), "--to", str(tmp_path / "junk"), check=False)
    assert proc.returncode == 2 and "not empty" in proc.stderr


def test_migrate_sqlite_exact_palace(pg_env, tmp_path):
    from mempalace_pg.atomic import open_drawers

    src, dst = tmp_path / "exact_palace", tmp_path / "pg_palace"
    vecs = make_source(src, backend_name="sqlite_exact", n=800)
    report = json.loads(run("--from", str(src), "--to", str(dst), "--json").stdout)
    assert report["source_backend"] == "sqlite_exact" and report["ok"] and report["sampled"] > 0
    drawers, _ = open_drawers(str(dst), create=False)
    got = drawers.get(ids=["drawer_00003"], include=["embeddings"])
    assert np.allclose(np.asarray(got.embeddings[0]), vecs[3], atol=1e-6)


def test_migrate_builtin_pgvector_palace(pg_env, builtin_pgvector_dsn, tmp_path, monkeypatch):
    """MemPalace's built-in pgvector backend as the source (it reads its DSN from MEMPALACE_PGVECTOR_DSN,
    as it does for MemPalace itself)."""
    from mempalace_pg.atomic import open_drawers

    namespace = f"mig{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("MEMPALACE_PGVECTOR_DSN", builtin_pgvector_dsn)  # its tables go in their own schema
    monkeypatch.setenv("MEMPALACE_PGVECTOR_NAMESPACE", namespace)
    src, dst = tmp_path / "pgvector_palace", tmp_path / "pg_palace"
    from mempalace.backends.registry import get_backend_class

    backend = get_backend_class("pgvector")()
    from mempalace.backends import PalaceRef

    col = backend.get_collection(
        palace=PalaceRef(id=str(src), local_path=str(src)),
        collection_name="mempalace_drawers",
        create=True,
        options={"namespace": namespace},
    )
    try:
        vecs = np.random.default_rng(4).normal(size=(300, 16)).astype("float32")
        col.add(
            ids=[f"p{i}" for i in range(300)],
            documents=[f"pg note {i}" for i in range(300)],
            metadatas=[{"wing": "w", "room": f"r{i % 2}"} for i in range(300)],
            embeddings=vecs.tolist(),
        )
        backend.close()
        report = json.loads(run("--from", str(src), "--to", str(dst), "--json").stdout)
        assert report["source_backend"] == "pgvector" and report["ok"]
        assert report["collections"]["mempalace_drawers"]["target"] == 300 and report["sampled"] == 25
        drawers, _ = open_drawers(str(dst), create=False)
        got = drawers.get(ids=["p9"], include=["documents", "embeddings"])
        assert got.documents == ["pg note 9"] and np.allclose(got.embeddings[0], vecs[9], atol=1e-6)
    finally:
        backend.close()  # the fixture drops its schema, the table with it
