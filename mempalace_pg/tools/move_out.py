"""``mempalace-pg move-out --to <new palace dir>``: the way back, a postgres palace copied out to a palace
MemPalace keeps in files (Chroma by default) and its graph to MemPalace's SQLite knowledge graph.

Written through MemPalace's own API only: the target backend's ``get_collection(create=True)`` and
``upsert`` (records with their stored embeddings, so nothing is re-embedded, and the embedder identity),
and the SQLite ``KnowledgeGraph``'s replication call ``apply_row`` (entities and facts with their ids,
validity and provenance as they are). What it writes is what MemPalace itself would have written; the
postgres palace is only read, and stays as it is.

* Refuses a target directory that holds anything, so nothing of an existing palace is overwritten.
* Checked: counts per collection and per graph table, and a sample of records read back from the new
  palace and compared with the source (embeddings to float32 precision).
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from mempalace_pg.config import ConfigError, Settings

PAGE = 500
SAMPLE = 25
#: Where MemPalace looks for a palace's graph when it is given ``--palace``.
GRAPH_FILE = "knowledge_graph.sqlite3"
TARGET_BACKENDS = ("chroma", "sqlite_exact")

Progress = Callable[[str, int, int, float], None]


@dataclass
class MoveOutReport:
    source: str
    target: str
    backend: str
    graph_file: str
    collections: dict = field(default_factory=dict)  # name -> {"source": n, "target": n}
    graph: dict = field(default_factory=dict)  # table -> {"source": n, "target": n}
    sampled: int = 0
    mismatches: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        counted = list(self.collections.values()) + list(self.graph.values())
        return all(c["source"] == c["target"] for c in counted) and not self.mismatches

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "source": self.source,
            "target": self.target,
            "backend": self.backend,
            "graph_file": self.graph_file,
            "collections": self.collections,
            "graph": self.graph,
            "sampled": self.sampled,
            "mismatches": self.mismatches[:20],
            "seconds": round(self.seconds, 1),
        }


def move_out(
    source: dict,
    target: str,
    *,
    backend: str = "chroma",
    graph_file: Optional[str] = None,
    page: int = PAGE,
    progress: Optional[Progress] = None,
) -> MoveOutReport:
    """Copy the postgres palace ``source`` (``palace_path`` or ``palace_key`` + ``namespace``, with
    ``settings``: what :func:`mempalace_pg.cli.common.palace_target` gives) to a new ``backend`` palace in
    the directory ``target`` and its graph to ``graph_file`` (default ``<target>/knowledge_graph.sqlite3``).
    """
    from mempalace.backends import PalaceRef
    from mempalace.backends.registry import get_backend_class

    from mempalace_pg.graph.kg import AgeKnowledgeGraph
    from mempalace_pg.graph.routing import sqlite_class
    from mempalace_pg.store.backend import PostgresBackend, existing_collections

    started = time.perf_counter()
    if backend not in TARGET_BACKENDS:
        raise ConfigError(f"--backend must be one of {', '.join(TARGET_BACKENDS)}, not {backend!r}")
    if page < 1:
        raise ConfigError("--batch must be 1 or more")
    settings: Settings = source["settings"]
    target = os.path.realpath(os.path.expanduser(target))
    graph_file = os.path.realpath(os.path.expanduser(graph_file or os.path.join(target, GRAPH_FILE)))
    if os.path.exists(target) and (not os.path.isdir(target) or os.listdir(target)):
        raise ConfigError(f"--to {target}: not an empty directory; give a new palace directory")
    if os.path.exists(graph_file):
        raise ConfigError(f"--graph {graph_file}: the file exists; give a new file")
    src_path = source.get("palace_path")
    if src_path and os.path.realpath(src_path) == target:
        raise ConfigError("--to must be a new palace directory, not the postgres palace")
    ref = (
        PalaceRef(id=src_path, local_path=src_path)
        if src_path
        else PalaceRef(id=source["palace_key"], namespace=source.get("namespace"))
    )
    report = MoveOutReport(
        source=src_path or source["palace_key"], target=target, backend=backend, graph_file=graph_file
    )
    os.makedirs(target, exist_ok=True)
    pg = PostgresBackend()
    out = get_backend_class(backend)()
    try:
        out_ref = PalaceRef(id=target, local_path=target)
        for name, src in existing_collections(pg, ref, settings=settings).items():
            dst = out.get_collection(palace=out_ref, collection_name=name, create=True)
            identity = src.get_stored_embedder_identity()
            if identity is not None:
                dst.set_embedder_identity(identity)
            _copy(report, name, src, dst, page, progress)
            _check_sample(report, name, src, dst)
        kg = AgeKnowledgeGraph(**source)
        os.makedirs(os.path.dirname(graph_file), exist_ok=True)
        sqlite_kg = sqlite_class()(graph_file)
        try:
            read = {}
            for table in ("entities", "triples"):
                read[table] = 0
                for row in kg.iter_rows(table):
                    sqlite_kg.apply_row(table, row)
                    read[table] += 1
            written = sqlite_kg.stats()
            report.graph = {t: {"source": n, "target": int(written[t])} for t, n in read.items()}
        finally:
            sqlite_kg.close()
    finally:
        for b in (out, pg):
            try:
                b.close()
            except Exception:
                pass
    report.seconds = time.perf_counter() - started
    return report


def _copy(report: MoveOutReport, name: str, src, dst, page: int, progress: Optional[Progress]) -> None:
    total, done, started = src.count(), 0, time.perf_counter()
    offset = 0
    while True:
        got = src.get(limit=page, offset=offset, include=["documents", "metadatas", "embeddings"])
        if not got.ids:
            break
        offset += len(got.ids)
        dst.upsert(
            ids=list(got.ids),
            documents=list(got.documents),
            metadatas=[dict(m or {}) for m in got.metadatas],
            embeddings=[list(map(float, e)) for e in got.embeddings],
        )
        done += len(got.ids)
        if progress is not None:
            progress(name, done, total, time.perf_counter() - started)
    report.collections[name] = {"source": total, "target": dst.count()}


def _check_sample(report: MoveOutReport, name: str, src, dst) -> None:
    """A sample of records read back from both sides, compared field by field."""
    ids = list(src.get(include=[]).ids)
    sample = random.Random(0).sample(ids, min(SAMPLE, len(ids)))
    if not sample:
        return
    include = ["documents", "metadatas", "embeddings"]
    a, b = src.get(ids=sample, include=include), dst.get(ids=sample, include=include)
    theirs = {i: (d, m, e) for i, d, m, e in zip(b.ids, b.documents, b.metadatas, b.embeddings)}
    for i, doc, meta, emb in zip(a.ids, a.documents, a.metadatas, a.embeddings):
        report.sampled += 1
        got = theirs.get(i)
        if got is None:
            report.mismatches.append(f"{name}/{i}: missing")
        elif got[0] != doc:
            report.mismatches.append(f"{name}/{i}: document differs")
        elif dict(got[1] or {}) != dict(meta or {}):
            report.mismatches.append(f"{name}/{i}: metadata differs")
        elif not np.allclose(np.asarray(got[2], np.float32), np.asarray(emb, np.float32), atol=1e-6):
            report.mismatches.append(f"{name}/{i}: embedding differs")


__all__ = ["MoveOutReport", "move_out", "TARGET_BACKENDS"]
