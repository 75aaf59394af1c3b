"""`mempalace-pg export` / `import`: one palace to portable JSON lines and back."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
from run_cli import run_cli

from mempalace_pg.atomic import open_drawers
from mempalace_pg.tools.portable import ExportFormatError, check_file, export_palace, import_palace


def cli(*args):
    proc = run_cli(*args, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def source(pg_env, backend):
    from mempalace.backends import PalaceRef
    from mempalace.backends.base import EmbedderIdentity

    key = f"src-{uuid.uuid4().hex[:8]}"
    drawers, kg = open_drawers(palace_key=key)
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(1200, 16)).astype("float32")
    drawers.add(
        ids=[f"d{i:04d}" for i in range(1200)],
        documents=[f'drawer {i} — naïve ünïcode "q"' for i in range(1200)],
        metadatas=[{"wing": f"w{i % 3}", "room": "r", "n": i, "ok": i % 2 == 0} for i in range(1200)],
        embeddings=vecs.tolist(),
    )
    drawers.set_embedder_identity(EmbedderIdentity(model_name="test-model", dimension=16))
    closets = backend.get_collection(
        palace=PalaceRef(id=key, local_path=None), collection_name="mempalace_closets", create=True
    )
    closets.add(ids=["c1"], documents=["closet"], metadatas=[{"wing": "w0"}], embeddings=[vecs[0].tolist()])
    kg.add_entity("Alice", "person", {"nick": "al"})
    kg.add_triple("Alice", "wrote", "drawer 1", valid_from="2026-01-01", source_drawer_id="d0001")
    kg.add_triple("Alice", "lives_in", "Porto", valid_from="2020-01-01", valid_to="2025-12-31")
    return key, drawers, kg, vecs


def test_export_import_round_trip(source, tmp_path):
    key, drawers, kg, vecs = source
    path = tmp_path / "palace.jsonl"
    code, out, err = cli("export", str(path), "--palace-key", key)
    assert code == 0, err
    header, counts = check_file(str(path))
    assert header["palace_key"] == key and counts == {
        "mempalace_drawers": 1200,
        "mempalace_closets": 1,
        "entities": 3,
        "triples": 2,
    }
    target = f"dst-{uuid.uuid4().hex[:8]}"
    for _ in range(2):  # idempotent: the second run changes nothing
        code, out, err = cli("import", str(path), "--palace-key", target, "--json")
        assert code == 0, err
        report = json.loads(out)
        assert (
            report["ok"] and report["found"]["mempalace_drawers"] == 1200 and report["found"]["triples"] == 2
        )
    dst_drawers, dst_kg = open_drawers(palace_key=target)
    a = drawers.get(include=["documents", "metadatas", "embeddings"])
    b = dst_drawers.get(include=["documents", "metadatas", "embeddings"])
    order_a, order_b = np.argsort(a.ids), np.argsort(b.ids)
    assert [a.ids[i] for i in order_a] == [b.ids[i] for i in order_b]
    assert [a.documents[i] for i in order_a] == [b.documents[i] for i in order_b]
    assert [a.metadatas[i] for i in order_a] == [b.metadatas[i] for i in order_b]
    assert np.array_equal(np.asarray(a.embeddings)[order_a], np.asarray(b.embeddings)[order_b])  # bit for bit
    assert dst_drawers.get_stored_embedder_identity().model_name == "test-model"
    q = vecs[7].tolist()
    assert (
        dst_drawers.query(query_embeddings=[q], n_results=5).ids
        == drawers.query(query_embeddings=[q], n_results=5).ids
    )
    for g in (kg, dst_kg):
        assert g.query_entity("Alice", as_of="2024-06-01") == kg.query_entity("Alice", as_of="2024-06-01")
    assert dst_kg.stats() == kg.stats()


def test_damaged_files_are_refused_before_anything_is_written(source, tmp_path):
    key, drawers, kg, _ = source
    path = tmp_path / "palace.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        export_palace(out, drawers, kg)
    lines = path.read_text(encoding="utf-8").splitlines()
    cases = {
        "cut short": lines[:-1],
        "bad JSON": lines[:5] + ["{not json"] + lines[5:],
        "NaN vector": lines[:2]
        + [json.dumps({**json.loads(lines[2]), "embedding": [float("nan")] * 16})]
        + lines[3:],
        "count mismatch": lines[:3] + lines[4:],
        "no header": lines[1:],
    }
    target = f"dst-{uuid.uuid4().hex[:8]}"
    dst_drawers, dst_kg = open_drawers(palace_key=target)
    for name, content in cases.items():
        bad = tmp_path / f"{name.replace(' ', '_')}.jsonl"
        bad.write_text("\n".join(content) + "\n", encoding="utf-8")
        with pytest.raises(ExportFormatError):
            import_palace(str(bad), dst_drawers, dst_kg)
        assert dst_drawers.count() == 0 and dst_kg.stats()["triples"] == 0, name
    code, out, err = cli("import", str(tmp_path / "cut_short.jsonl"), "--palace-key", target)
    assert code == 2 and "no footer" in err


def test_import_refuses_another_embedder_or_width(source, tmp_path):
    from mempalace.backends.base import EmbedderIdentity

    key, drawers, kg, _ = source
    path = tmp_path / "palace.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        export_palace(out, drawers, kg)
    other, other_kg = open_drawers(palace_key=f"other-{uuid.uuid4().hex[:8]}")
    other.add(ids=["x"], documents=["x"], embeddings=[[1.0, 0.0]])
    with pytest.raises(ExportFormatError, match="2-d vectors"):
        import_palace(str(path), other, other_kg)
    third, third_kg = open_drawers(palace_key=f"third-{uuid.uuid4().hex[:8]}")
    third.set_embedder_identity(EmbedderIdentity(model_name="another-model", dimension=16))
    with pytest.raises(ExportFormatError, match="another-model"):
        import_palace(str(path), third, third_kg)
    assert third.count() == 0
