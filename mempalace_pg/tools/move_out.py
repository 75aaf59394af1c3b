"""``mempalace-pg move-out --to <new palace dir>``: the way back, a postgres palace copied out to a palace
MemPalace keeps in files (Chroma by default) and its graph to MemPalace's SQLite knowledge graph.

Written through MemPalace's own API only: the target backend's ``get_collection(create=True)`` and
``upsert`` (records with their stored embeddings, so nothing is re-embedded, and the embedder identity),
and the SQLite ``KnowledgeGraph``'s replication call ``apply_row`` (entities and facts with their ids,
validity and provenance as they are). What it writes is what MemPalace itself would have written; the
postgres palace is only read, and stays as it is.

* Refuses a target directory that holds anything, so nothing of an existing palace is overwritten.
* Checked: counts per collection and per graph table, and a uniform sample of the records copied read
  back from both sides and compared field by field (:mod:`mempalace_pg.tools.readback`, as ``migrate``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from mempalace_pg.config import ConfigError, Settings
from mempalace_pg.tools import readback

PAGE = 500
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
    from mempalace.backends.base import PalaceRef
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
    """Copy one collection a page at a time, then read a uniform sample of it back from both sides."""
    total, done, started = src.count(), 0, time.perf_counter()
    sample = readback.Reservoir()
    for ids, documents, metadatas, embeddings in readback.pages_through_backend(src, page):
        dst.upsert(
            ids=ids,
            documents=list(documents),
            metadatas=[dict(m or {}) for m in metadatas],
            embeddings=[list(map(float, e)) for e in embeddings],
        )
        sample.offer(ids)
        done += len(ids)
        if progress is not None:
            progress(name, done, total, time.perf_counter() - started)
    report.collections[name] = {"source": total, "target": dst.count()}
    if sample.items:
        got = src.get(ids=sample.items, include=readback.INCLUDE)
        report.sampled += len(sample.items)
        report.mismatches += readback.differences(
            name, (got.ids, got.documents, got.metadatas, got.embeddings), dst, sample.items
        )


__all__ = ["MoveOutReport", "move_out", "TARGET_BACKENDS"]
