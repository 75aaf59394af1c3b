"""Reading a Chroma palace from its files gives exactly what Chroma's own reader gives.

Palaces are written by MemPalace's Chroma backend (the real chromadb), with records still in Chroma's
log, vectors updated after they reached the index, deletions, upserts and every metadata value type;
each is then read both ways and compared record by record."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from mempalace_pg.tools.chroma_files import ChromaFormatError, ChromaPalaceFiles


def write_palace(path: Path, n: int) -> None:
    from mempalace.backends import PalaceRef
    from mempalace.backends.registry import get_backend_class

    backend = get_backend_class("chroma")()
    ref = PalaceRef(id=str(path), local_path=str(path))
    col = backend.get_collection(palace=ref, collection_name="mempalace_drawers", create=True)
    rng = np.random.default_rng(5)
    vecs = rng.normal(size=(n, 12)).astype("float32") * 3
    for s in range(0, n, 400):
        e = min(n, s + 400)
        col.add(
            ids=[f"d{i}" for i in range(s, e)],
            documents=[f"doc {i} ✓ 'q'" for i in range(s, e)],
            metadatas=[
                {
                    "wing": f"w{i % 3}",
                    "i": i,
                    "half": i / 2,
                    "even": i % 2 == 0,
                    **({"tags": ["a", f"t{i}"]} if i % 5 == 0 else {}),
                }
                for i in range(s, e)
            ],
            embeddings=vecs[s:e].tolist(),
        )
    # after the index took them in: new vectors for some, metadata-only updates, deletions, upserts
    col.update(ids=["d3", f"d{n - 2}"], embeddings=(vecs[[3, n - 2]] * -1).tolist())
    col.update(ids=["d4"], metadatas=[{"wing": "moved", "i": -4}])
    col.delete(ids=["d5", f"d{n - 1}"])
    col.upsert(
        ids=["d6", "new_1"],
        documents=["doc 6 again", "brand new"],
        metadatas=[{"wing": "w0"}, {"wing": "w9"}],
        embeddings=rng.normal(size=(2, 12)).astype("float32").tolist(),
    )
    closets = backend.get_collection(palace=ref, collection_name="mempalace_closets", create=True)
    closets.add(
        ids=["c1"], documents=["only in the log"], metadatas=[{"wing": "w0"}], embeddings=[vecs[0].tolist()]
    )
    backend.close()


def read_with_chroma(path: Path, name: str) -> dict:
    from mempalace.backends import PalaceRef
    from mempalace.backends.registry import get_backend_class

    backend = get_backend_class("chroma")()
    try:
        col = backend.get_collection(
            palace=PalaceRef(id=str(path), local_path=str(path)), collection_name=name, create=False
        )
        got = col.get(include=["documents", "metadatas", "embeddings"], limit=1_000_000)
        return {
            rid: (d, m or None, np.asarray(e, dtype=np.float32))
            for rid, d, m, e in zip(got.ids, got.documents, got.metadatas, got.embeddings)
        }
    finally:
        backend.close()


def assert_same(mine: dict, theirs: dict) -> None:
    assert mine.keys() == theirs.keys()
    for rid, (doc, meta, vec) in theirs.items():
        assert mine[rid][0] == doc, rid
        assert mine[rid][1] == meta, rid
        assert np.allclose(mine[rid][2], vec, rtol=0, atol=1e-6), rid  # within float32 rounding


@pytest.mark.parametrize("n", [700, 2600])  # all still in the log; most in the index, the rest in the log
def test_files_read_as_chroma_reads_them(tmp_path, n):
    src = tmp_path / "palace"
    write_palace(src, n)
    files = tmp_path / "files"
    shutil.copytree(src, files)  # each reader gets its own copy: Chroma rewrites files when it opens them
    with ChromaPalaceFiles(str(files)) as palace:
        for name in ("mempalace_drawers", "mempalace_closets"):
            col = palace.collection(name)
            mine = {}
            for ids, docs, metas, vecs in col.pages(page=250):
                assert vecs.dtype == np.float32 and vecs.shape == (len(ids), 12)
                mine.update({rid: (d, m, v) for rid, d, m, v in zip(ids, docs, metas, vecs)})
            assert col.count() == len(mine)
            theirs = read_with_chroma(src, name)
            assert_same(mine, theirs)
            if name == "mempalace_drawers":
                assert mine["d10"][1]["tags"] == ["a", "t10"]  # a list value, in order
                assert mine["d4"][1]["wing"] == "moved" and mine["d6"][0] == "doc 6 again"
                assert "d5" not in mine and "new_1" in mine
                ids, docs, metas, vecs = col.records(["d3", "missing", "new_1"])
                assert ids == ["d3", "new_1"] and np.allclose(vecs[0], theirs["d3"][2], atol=1e-6)


def test_layouts_it_does_not_know_are_refused(tmp_path):
    src = tmp_path / "palace"
    write_palace(src, 1200)
    segment = next(
        p for p in src.iterdir() if (p / "header.bin").is_file() and (p / "index_metadata.pickle").is_file()
    )
    header = bytearray((segment / "header.bin").read_bytes())
    header[0] = 2  # another format version
    (segment / "header.bin").write_bytes(bytes(header))
    with ChromaPalaceFiles(str(src)) as palace, pytest.raises(ChromaFormatError, match="version"):
        palace.collection("mempalace_drawers")
    header[0] = 1
    (segment / "header.bin").write_bytes(bytes(header))
    # a pickle that would build an object is never unpickled
    import pickle

    (segment / "index_metadata.pickle").write_bytes(pickle.dumps({"id_to_label": {"d0": Path("x")}}))
    with ChromaPalaceFiles(str(src)) as palace, pytest.raises(ChromaFormatError, match="pathlib"):
        palace.collection("mempalace_drawers")
    with pytest.raises(ChromaFormatError, match="does not exist"):
        ChromaPalaceFiles(str(tmp_path / "nowhere"))
