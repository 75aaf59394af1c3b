"""What the whole-palace copies (``migrate`` in, ``move-out`` back) share: reading a collection page by
page through its MemPalace backend, a uniform sample of the ids copied, and the field-by-field comparison
of the sampled records read back from both sides."""

from __future__ import annotations

import random

import numpy as np

#: Records a copy reads back from both sides and compares.
SAMPLE = 25
INCLUDE = ["documents", "metadatas", "embeddings"]


def pages_through_backend(col, page: int):
    """The pages ``(ids, documents, metadatas, embeddings)`` of a collection read through its backend."""
    offset = 0
    while True:
        got = col.get(limit=page, offset=offset, include=INCLUDE)
        if not got.ids:
            return
        offset += len(got.ids)
        yield list(got.ids), got.documents, got.metadatas, got.embeddings


class Reservoir:
    """A uniform sample of ``size`` ids from a stream of them (reservoir sampling), the same sample
    for the same stream (a fixed seed)."""

    def __init__(self, size: int = SAMPLE, seed: int = 7):
        self.size = size
        self.items: list = []
        self._seen = 0
        self._rng = random.Random(seed)

    def offer(self, ids: list) -> None:
        for rid in ids:
            self._seen += 1
            if len(self.items) < self.size:
                self.items.append(rid)
            elif self._rng.random() < self.size / self._seen:
                self.items[self._rng.randrange(self.size)] = rid


def differences(name: str, source_rows: tuple, target, sample: list) -> list[str]:
    """How the ``sample`` records of ``source_rows`` (ids, documents, metadatas, embeddings, as the source
    gave them) differ from the same ids read back from the collection ``target``: one line each, with the
    collection's ``name``. Embeddings compare to float32 precision."""
    theirs = {rid: (d, m, e) for rid, d, m, e in zip(*source_rows)}
    b = target.get(ids=sample, include=INCLUDE)
    ours = {rid: (d, m, e) for rid, d, m, e in zip(b.ids, b.documents, b.metadatas, b.embeddings)}
    found = []
    for rid in sample:
        if rid not in ours:
            found.append(f"{name}/{rid}: missing in the target")
            continue
        (d1, m1, e1), (d2, m2, e2) = theirs[rid], ours[rid]
        if (d1 or "") != (d2 or ""):
            found.append(f"{name}/{rid}: document differs")
        if (m1 or {}) != (m2 or {}):
            found.append(f"{name}/{rid}: metadata differs")
        if not np.allclose(np.asarray(e1, dtype=np.float32), np.asarray(e2, dtype=np.float32), atol=1e-6):
            found.append(f"{name}/{rid}: embedding differs")
    return found


__all__ = ["INCLUDE", "SAMPLE", "Reservoir", "differences", "pages_through_backend"]
