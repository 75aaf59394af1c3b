"""``mempalace-pg migrate --from <palace dir> --to <new palace dir>``: move a palace into PostgreSQL.

The source is read page by page, read-only: its drawers, closets and assets with their stored
embeddings (no embedding model is loaded: nothing is re-embedded), metadata and embedder identity, then
its SQLite knowledge graph (``mempalace-pg kg import``). A Chroma palace's records are read from its
files (:mod:`mempalace_pg.tools.chroma_files`), because Chroma's own reader loads a collection's whole vector
index into memory first; a layout that reader does not know falls back to Chroma's reader, as the report
says. Every other palace is read through MemPalace's own backend (``sqlite_exact``, the built-in
``pgvector``).

* **Never changes the source.** A file-based palace (Chroma, ``sqlite_exact``) is read from a temporary
  snapshot copy (Chroma rewrites its files when a palace is opened, even to read); the graph file is
  opened read-only. The snapshot needs as much free space as the palace, in the system temp directory.
* **Resumable.** Every batch commits; a rerun skips the ids the target already holds, so a stopped
  migration picks up where it stopped, and running it twice writes nothing the second time.
* **Refusals.** A target palace that holds records but was not migrated from this source is refused, as
  is a target collection written by another embedder or of another vector width.
* **Checked.** Counts are compared per collection, and a reservoir sample of records is read back from
  both sides and compared field by field (embeddings to float32 precision).
* Memory stays flat: one page of the source at a time, written by the bulk loader (binary COPY, the
  vector index built once at the end).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from mempalace_pg.config import ConfigError, Settings
from mempalace_pg.tools import readback

#: Backends whose palace is a directory of files: read from a snapshot copy (temporary; needs the space).
FILE_BACKENDS = ("chroma", "sqlite_exact")
PAGE = 1000
#: The SQLite knowledge graph's file in a palace directory.
GRAPH_FILE = "knowledge_graph.sqlite3"

Progress = Callable[[str, int, int, float], None]


@dataclass
class MigrationReport:
    source: str
    source_backend: str
    target: str
    dry_run: bool = False
    collections: dict = field(default_factory=dict)  # name -> {source, skipped, written, target}
    graph: Optional[dict] = None
    sampled: int = 0
    mismatches: list = field(default_factory=list)
    # name -> "files", or the backend read through ("chroma (its files: why not)")
    reader: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        counts_ok = (
            all(c.get("target") == c["source"] for c in self.collections.values())
            if not self.dry_run
            else True
        )
        return counts_ok and not self.mismatches and (self.graph is None or self.graph.get("ok", True))

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "source": self.source,
            "source_backend": self.source_backend,
            "target": self.target,
            "dry_run": self.dry_run,
            "collections": self.collections,
            "graph": self.graph,
            "sampled": self.sampled,
            "mismatches": self.mismatches[:20],
            "reader": self.reader,
            "seconds": round(self.seconds, 1),
        }


def migrate(
    source: str,
    target: str,
    *,
    settings: Optional[Settings] = None,
    dry_run: bool = False,
    page: int = PAGE,
    progress: Optional[Progress] = None,
) -> MigrationReport:
    """Copy the palace at ``source`` into a postgres palace at ``target`` (see the module doc).

    ``progress(collection, records read, records in the source, seconds so far)`` is called after
    each page."""
    started = time.perf_counter()
    settings = settings or Settings.load()
    source = os.path.realpath(os.path.expanduser(source))
    target = os.path.realpath(os.path.expanduser(target))
    if source == target:
        raise ConfigError("--to must be a new palace directory, not the source")
    backend_name = _source_backend(source)
    report = MigrationReport(source=source, source_backend=backend_name, target=target, dry_run=dry_run)
    snapshot = _take_snapshot(source, backend_name)
    reader = _SourceReader.open(snapshot.palace, backend_name)
    try:
        palace = _TargetPalace.open(target, source, settings)
        _check_target(palace)
        _count_source(report, reader, snapshot)
        if not dry_run:
            for name, src_col in reader.collections.items():
                _copy_collection(
                    report, reader, name, src_col=src_col, palace=palace, page=page, progress=progress
                )
            if report.graph is not None:
                _copy_graph(report, snapshot.graph, palace)
    finally:
        reader.close()
        shutil.rmtree(snapshot.directory, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    return report


# -- the source --------------------------------------------------------------------------------------


def _source_backend(path: str) -> str:
    from mempalace.backends.registry import detect_backends_for_path

    found = [b for b in detect_backends_for_path(path) if b != "postgres"]
    if not found:
        raise ConfigError(
            f"{path}: no MemPalace palace found there (no Chroma, sqlite_exact or pgvector palace)"
        )
    return found[0]


@dataclass
class _Snapshot:
    """The temporary copy migrate reads from (removed at the end)."""

    directory: str
    palace: str  # where the collections are read: the copy of a file-based palace, else the source
    graph: str  # the copy of the graph file
    has_graph: bool  # whether the source has a graph file


def _take_snapshot(source: str, backend_name: str) -> _Snapshot:
    # File-based palaces are read from a snapshot copy: opening a Chroma palace lets Chroma rewrite its
    # files (it folds its log into the index on load), and a snapshot also cannot change under us.
    # The SQLite graph too (with its -wal/-shm if a writer left them): even a read-only open of a WAL
    # database creates files beside it.
    kg_path = os.path.join(source, GRAPH_FILE)
    directory = tempfile.mkdtemp(prefix="mempalace-pg-migrate-")
    if backend_name in FILE_BACKENDS:
        shutil.copytree(
            source,
            os.path.join(directory, "palace"),
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns(GRAPH_FILE + "*"),
        )
    for suffix in ("", "-wal", "-shm"):
        if os.path.isfile(kg_path + suffix):
            shutil.copy2(kg_path + suffix, os.path.join(directory, GRAPH_FILE + suffix))
    return _Snapshot(
        directory=directory,
        palace=os.path.join(directory, "palace") if backend_name in FILE_BACKENDS else source,
        graph=os.path.join(directory, GRAPH_FILE),
        has_graph=os.path.isfile(kg_path),
    )


@dataclass
class _SourceReader:
    """The source palace's collections, read from Chroma's files or through its MemPalace backend."""

    backend_name: str
    collections: dict  # name -> collection
    files: Any = None  # the ChromaPalaceFiles they are read from, if so
    backend: Any = None  # else the MemPalace backend they are read through
    why_not_files: Optional[str] = None

    @classmethod
    def open(cls, palace_dir: str, backend_name: str) -> "_SourceReader":
        if backend_name == "chroma":
            files, collections, why_not = _open_chroma_files(palace_dir)
            if collections is not None:
                return cls(backend_name, collections, files=files)
        else:
            why_not = None
        backend, collections = _open_source(palace_dir, backend_name)
        return cls(backend_name, collections, backend=backend, why_not_files=why_not)

    def pages(self, src_col, page: int):
        """``(the pages of src_col, how they are read as the report says it)``."""
        if self.files is not None:
            return src_col.pages(page), "files"
        how = (
            f"{self.backend_name} (its files: {self.why_not_files})"
            if self.why_not_files
            else self.backend_name
        )
        return readback.pages_through_backend(src_col, page), how

    def close(self) -> None:
        if self.files is not None:
            self.files.close()
        try:
            if self.backend is not None:
                self.backend.close()
        except Exception:
            pass


def _open_source(path: str, backend_name: str):
    from mempalace.backends.base import PalaceRef
    from mempalace.backends.registry import get_backend_class

    from mempalace_pg.store.backend import existing_collections

    backend = get_backend_class(backend_name)()  # our own instance: closing it touches nobody else's
    return backend, existing_collections(backend, PalaceRef(id=path, local_path=path), {"read_only": True})


def _open_chroma_files(palace_dir: str):
    """A Chroma palace's collections read from its files: ``(palace files, {name: collection}, None)``,
    or ``(None, None, why not)`` when a file is in a layout :mod:`.chroma_files` does not know."""
    from mempalace_pg.store.collection import COLLECTIONS
    from mempalace_pg.tools.chroma_files import ChromaFormatError, ChromaPalaceFiles

    files = None
    try:
        files = ChromaPalaceFiles(palace_dir)
        collections = {name: files.collection(name) for name in COLLECTIONS if files.has_collection(name)}
        return files, collections, None
    except ChromaFormatError as exc:
        if files is not None:
            files.close()
        return None, None, str(exc)


def _count_source(report: MigrationReport, reader: _SourceReader, snapshot: _Snapshot) -> None:
    """What the source holds: records per collection, rows per graph table."""
    from mempalace_pg.graph.kg_import import TABLES, count_rows

    for name, col in reader.collections.items():
        report.collections[name] = {"source": col.count()}
    if snapshot.has_graph:
        src = sqlite3.connect(f"file:{snapshot.graph}?mode=ro", uri=True)
        try:
            report.graph = {table: count_rows(src, table) for table in TABLES}
        finally:
            src.close()


# -- the target --------------------------------------------------------------------------------------


@dataclass
class _TargetPalace:
    """The postgres palace written to, and the source it is migrated from."""

    path: str
    source: str
    settings: Settings
    backend: Any  # PostgresBackend
    ref: Any  # its PalaceRef

    @classmethod
    def open(cls, path: str, source: str, settings: Settings) -> "_TargetPalace":
        from mempalace.backends.base import PalaceRef

        from mempalace_pg.store.backend import PostgresBackend

        return cls(
            path=path,
            source=source,
            settings=settings,
            backend=PostgresBackend(),
            ref=PalaceRef(id=path, local_path=path),
        )


def _check_target(palace: _TargetPalace) -> None:
    """Refuse a target that holds records not migrated from this source, or a non-empty directory."""
    from mempalace_pg.marker import marker_path
    from mempalace_pg.store.backend import existing_collections

    target, source = palace.path, palace.source
    if os.path.isfile(marker_path(target)):
        existing = existing_collections(palace.backend, palace.ref, settings=palace.settings)
        held = sum(c.count() for c in existing.values())
        origin = _provenance(target)
        if held and (origin or {}).get("path") != source:
            raise ConfigError(
                f"the target palace {target} already holds {held} records that were not "
                f"migrated from {source}: refusing to mix palaces "
                "(choose a new --to directory)"
            )
    elif os.path.exists(target) and os.listdir(target):
        raise ConfigError(f"{target} exists and is not empty: --to must be a new (or empty) directory")


def _provenance(target_dir: str) -> Optional[dict]:
    from mempalace_pg.marker import marker_path

    try:
        with open(marker_path(target_dir), encoding="utf-8") as f:
            return json.load(f).get("migrated_from")
    except (OSError, ValueError):
        return None


def _record_provenance(target_dir: str, source: str, backend_name: str) -> None:
    from mempalace_pg.marker import marker_path, write_atomically

    path = marker_path(target_dir)
    with open(path, encoding="utf-8") as f:
        marker = json.load(f)
    marker["migrated_from"] = {"path": source, "backend": backend_name}
    with write_atomically(path) as f:
        json.dump(marker, f, indent=2, ensure_ascii=False)
        f.write("\n")


# -- copying -----------------------------------------------------------------------------------------


def _copy_collection(
    report: MigrationReport,
    reader: _SourceReader,
    name: str,
    *,
    src_col,
    palace: _TargetPalace,
    page: int,
    progress: Optional[Progress],
) -> None:
    """Copy one collection (what the target holds already is skipped), then compare a sample."""
    col = _target_collection(palace, name, src_col, reader.backend_name)
    stats = report.collections[name]
    stats.update(skipped=0, written=0)
    sample = readback.Reservoir()
    t0 = time.perf_counter()
    pages, report.reader[name] = reader.pages(src_col, page)
    with col.bulk_load() as load:
        offset = 0
        for ids, documents, metadatas, embeddings in pages:
            offset += len(ids)
            sample.offer(ids)
            _load_missing(
                col, load, stats, ids=ids, documents=documents, metadatas=metadatas, embeddings=embeddings
            )
            if progress:
                progress(name, offset, stats["source"], time.perf_counter() - t0)
    stats["target"] = col.count()
    stats["seconds"] = round(time.perf_counter() - t0, 1)
    _compare(report, name, src_col, col, sample.items)


def _target_collection(palace: _TargetPalace, name: str, src_col, backend_name: str):
    """The target's collection ``name`` (created), refused when another embedder wrote it; the
    provenance and the source's embedder identity recorded."""
    identity = (
        src_col.get_stored_embedder_identity() if hasattr(src_col, "get_stored_embedder_identity") else None
    )
    col = palace.backend.open_collection(
        palace.settings, palace=palace.ref, collection_name=name, create=True
    )
    stored = col.get_stored_embedder_identity()
    if identity and stored and stored.model_name != identity.model_name:
        raise ConfigError(
            f"target collection {name} was written by embedder {stored.model_name!r}, the "
            f"source by {identity.model_name!r}: refusing to mix"
        )
    _record_provenance(palace.path, palace.source, backend_name)
    if identity and not stored:
        col.set_embedder_identity(identity)
    return col


def _load_missing(col, load, stats: dict, *, ids: list, documents: list, metadatas: list, embeddings) -> None:
    """Bulk-load the records of one page that the target does not hold yet."""
    have = set(col.get(ids=ids, include=[]).ids)
    keep = [i for i, rid in enumerate(ids) if rid not in have]
    stats["skipped"] += len(ids) - len(keep)
    if keep:
        emb = np.asarray(embeddings, dtype=np.float32)[keep]
        load(
            ids=[ids[i] for i in keep],
            documents=[documents[i] or "" for i in keep],
            metadatas=[(metadatas[i] or {}) for i in keep],
            embeddings=emb,
        )
        stats["written"] += len(keep)


def _copy_graph(report: MigrationReport, graph_file: str, palace: _TargetPalace) -> None:
    from mempalace_pg.graph.kg import AgeKnowledgeGraph
    from mempalace_pg.graph.kg_import import import_sqlite

    kg = AgeKnowledgeGraph(palace_path=palace.path, settings=palace.settings)
    result = import_sqlite(graph_file, kg)
    report.graph.update(
        ok=result.ok, written=result.written, verified=result.verified, seconds=round(result.seconds, 1)
    )


def _compare(report: MigrationReport, name: str, src_col, col, sample: list) -> None:
    """Read the sampled records back from the source and from the target and compare them field by field."""
    if not sample:
        return
    if hasattr(src_col, "records"):  # Chroma's files
        got = src_col.records(sample)
    else:
        page = src_col.get(ids=sample, include=readback.INCLUDE)
        got = (page.ids, page.documents, page.metadatas, page.embeddings)
    report.sampled += len(sample)
    report.mismatches += readback.differences(name, got, col, sample)


__all__ = ["migrate", "MigrationReport"]
