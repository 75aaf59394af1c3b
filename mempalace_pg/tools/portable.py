"""One palace as portable JSON lines: ``mempalace-pg export`` and ``mempalace-pg import``.

The file is plain JSON, one object per line, readable by anything:

    {"kind": "header", "format": "mempalace-pg-export", "version": 1, "palace_key": ..., "namespace": ...,
     "exported_at": ..., "schema_revision": ..., "collections": [{"name", "dimension", "embedder_model",
     "embedder_dimension"}, ...]}
    {"kind": "record", "collection": "mempalace_drawers", "id": ..., "document": ..., "metadata": {...},
     "embedding": [0.0123, ...]}                        # one per drawer, closet, asset
    {"kind": "entity", "row": {"id": ..., "name": ..., "type": ..., "properties": ..., "created_at": ...}}
    {"kind": "triple", "row": {"id": ..., "subject": ..., "predicate": ..., "object": ..., "valid_from": ...}}
    {"kind": "footer", "counts": {"mempalace_drawers": n, ..., "entities": n, "triples": n}}

Embeddings are written as the float32 values stored (JSON keeps them exactly). Knowledge-graph rows are
MemPalace's replication rows (``dump_rows`` / ``apply_row``), so facts keep their ids and validity.

Export streams (a server-side cursor; memory stays flat). Import is idempotent (records are upserted,
graph rows applied by id, unchanged rows skipped), writes in batches each committed whole, checks the
file first (header, the footer's counts, every line's shape), refuses a target collection of another
dimension or embedder, and verifies the counts at the end.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, Callable, Optional

from psycopg import sql

from mempalace_pg.graph.kg_import import write_batch
from mempalace_pg.store.backend import existing_collections

FORMAT = "mempalace-pg-export"
VERSION = 1
BATCH = 500


class ExportFormatError(ValueError):
    """The file is not a mempalace-pg export this version can read (the message says where)."""


#: The graph table each kind of graph line belongs to.
_GRAPH_TABLES = {"entity": "entities", "triple": "triples"}


@dataclass
class PalaceImportReport:
    """What :func:`import_palace` did: rows written, the counts the file promised, the counts found."""

    written: dict = field(default_factory=dict)
    expected: dict = field(default_factory=dict)
    found: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(self.found.get(k, 0) >= v for k, v in self.expected.items())

    def as_dict(self) -> dict:
        return {"ok": self.ok, "written": self.written, "expected": self.expected, "found": self.found}


def export_palace(
    out: IO[str], drawers_collection, kg, *, progress: Optional[Callable[[str, int], None]] = None
) -> dict:
    """Write the palace of ``drawers_collection`` (all its collections) and its graph ``kg`` to ``out``."""
    backend, ref = drawers_collection.backend, drawers_collection.palace
    cols = list(existing_collections(backend, ref, settings=drawers_collection.settings).values())
    out.write(json.dumps(_header(kg, cols), ensure_ascii=False) + "\n")
    counts: dict = {}
    db = drawers_collection.database()
    for col in cols:
        counts[col.name] = _export_records(out, db, col, progress)
    for table, kind in (("entities", "entity"), ("triples", "triple")):
        n = 0
        for row in kg.iter_rows(table):
            row.pop("_rowid")
            row.pop("rowid", None)
            out.write(json.dumps({"kind": kind, "row": row}, ensure_ascii=False) + "\n")
            n += 1
        counts[table] = n
    out.write(json.dumps({"kind": "footer", "counts": counts}) + "\n")
    return counts


def _header(kg, cols: list) -> dict:
    from mempalace_pg.db.schema import head_revision

    header = {
        "kind": "header",
        "format": FORMAT,
        "version": VERSION,
        "palace_key": kg.palace_key,
        "namespace": kg.namespace,
        "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "schema_revision": head_revision(),
        "collections": [],
    }
    for col in cols:
        identity = col.get_stored_embedder_identity()
        header["collections"].append(
            {
                "name": col.name,
                "dimension": col.partition.known_dimension(),
                "embedder_model": identity.model_name if identity else None,
                "embedder_dimension": identity.dimension if identity else None,
            }
        )
    return header


def _export_records(out: IO[str], db, col, progress: Optional[Callable[[str, int], None]]) -> int:
    """Write one collection's records; how many."""
    n = 0
    # in filing order (an index serves it), which an import then keeps
    query = sql.SQL("""
        SELECT id, document, metadata, embedding::real[]
        FROM {records}
        WHERE collection_pk = {collection_pk}
        ORDER BY seq
    """).format(records=col.partition.table, collection_pk=sql.Placeholder("collection_pk"))
    with db.connection() as conn, conn.transaction():
        with conn.cursor(name="mempalace_pg_export") as cur:
            cur.itersize = 2000
            cur.execute(query, {"collection_pk": col.partition.pk})
            for rid, document, metadata, embedding in cur:
                record = {
                    "kind": "record",
                    "collection": col.name,
                    "id": rid,
                    "document": document,
                    "metadata": metadata,
                    "embedding": embedding,
                }
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                n += 1
                if progress and n % 5000 == 0:
                    progress(col.name, n)
    return n


def _lines(path: str):
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ExportFormatError(f"{path}:{number}: not JSON ({exc.msg})") from None


def check_file(path: str) -> tuple[dict, dict]:
    """Read the whole file once, checking every line; return (header, footer counts)."""
    header, footer, seen = None, None, {}
    for number, obj in _lines(path):
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if number == 1 or header is None:
            header = _checked_header(path, number, obj, kind)
            continue
        if footer is not None:
            raise ExportFormatError(f"{path}:{number}: data after the footer")
        if kind == "footer":
            footer = obj.get("counts") or {}
            continue
        key = _checked_line_key(path, number, obj, kind, header)
        seen[key] = seen.get(key, 0) + 1
    if header is None:
        raise ExportFormatError(f"{path}: empty file")
    if footer is None:
        raise ExportFormatError(f"{path}: no footer line: the export was cut short")
    if {k: v for k, v in footer.items() if v} != seen:
        raise ExportFormatError(f"{path}: the footer counts {footer} but the file holds {seen}")
    return header, footer


def _checked_header(path: str, number: int, obj, kind: Optional[str]) -> dict:
    if kind != "header" or obj.get("format") != FORMAT:
        raise ExportFormatError(f"{path}:{number}: not a {FORMAT} file (no header line)")
    if obj.get("version") != VERSION:
        raise ExportFormatError(
            f"{path}: format version {obj.get('version')}; this mempalace-pg reads {VERSION}"
        )
    return obj


def _checked_line_key(path: str, number: int, obj: dict, kind: Optional[str], header: dict) -> str:
    """What a data line counts towards (its collection, ``entities`` or ``triples``), once checked."""
    if kind == "record":
        if not _is_record(obj, header):
            raise ExportFormatError(f"{path}:{number}: malformed record")
        return obj["collection"]
    if kind in _GRAPH_TABLES:
        if not isinstance(obj.get("row"), dict) or not isinstance(obj["row"].get("id"), str):
            raise ExportFormatError(f"{path}:{number}: {kind} without an id")
        return _GRAPH_TABLES[kind]
    raise ExportFormatError(f"{path}:{number}: unknown line type {kind!r}")


def _is_record(obj: dict, header: dict) -> bool:
    """A record of a collection the header names, with a string id and a list of finite numbers."""
    names = {c["name"] for c in header["collections"]}
    emb = obj.get("embedding")
    return (
        obj.get("collection") in names
        and isinstance(obj.get("id"), str)
        and isinstance(emb, list)
        and all(isinstance(x, (int, float)) and math.isfinite(x) for x in emb)
    )


def import_palace(
    path: str, drawers_collection, kg, *, progress: Optional[Callable[[str, int], None]] = None
) -> PalaceImportReport:
    """Load an export into the palace of ``drawers_collection`` / ``kg`` (idempotent; see the module doc)."""
    header, footer = check_file(path)
    report = PalaceImportReport(expected={k: v for k, v in footer.items() if v})
    targets = _target_collections(header, drawers_collection)
    batches = _Batches(targets, kg, report, progress)
    for _, obj in _lines(path):
        batches.add(obj)
    batches.flush_all()
    for name, col in targets.items():
        report.found[name] = col.count()
    stats = kg.stats()
    report.found["entities"], report.found["triples"] = stats["entities"], stats["triples"]
    return report


def _target_collections(header: dict, drawers_collection) -> dict:
    """The target palace's collection for each collection of the header (created when missing),
    refused when it holds another embedder's or another width's vectors."""
    from mempalace.backends.base import EmbedderIdentity

    backend, ref = drawers_collection.backend, drawers_collection.palace
    targets = {}
    for spec in header["collections"]:
        col = backend.open_collection(
            drawers_collection.settings, palace=ref, collection_name=spec["name"], create=True
        )
        stored = col.get_stored_embedder_identity()
        if stored and spec.get("embedder_model") and stored.model_name != spec["embedder_model"]:
            raise ExportFormatError(
                f"collection {spec['name']} of the target palace was written by embedder "
                f"{stored.model_name!r}; the export by {spec['embedder_model']!r}: "
                "refusing to mix"
            )
        dim = col.partition.known_dimension()
        if dim and spec.get("dimension") and dim != spec["dimension"]:
            raise ExportFormatError(
                f"collection {spec['name']} of the target palace holds {dim}-d vectors; "
                f"the export {spec['dimension']}-d: refusing to mix"
            )
        if not stored and spec.get("embedder_model"):
            col.set_embedder_identity(
                EmbedderIdentity(
                    model_name=spec["embedder_model"], dimension=int(spec.get("embedder_dimension") or 0)
                )
            )
        targets[spec["name"]] = col
    return targets


class _Batches:
    """An export's data lines gathered into batches (records per collection, graph rows per table),
    each written, and committed, when it is full; :meth:`flush_all` writes what is left."""

    def __init__(
        self, targets: dict, kg, report: PalaceImportReport, progress: Optional[Callable[[str, int], None]]
    ):
        self.targets, self.kg, self.report, self.progress = targets, kg, report, progress
        self.records: dict = {}
        self.graph_rows: dict = {"entities": [], "triples": []}

    def add(self, obj: dict) -> None:
        kind = obj["kind"]
        if kind == "record":
            self.records.setdefault(obj["collection"], []).append(obj)
            if len(self.records[obj["collection"]]) >= BATCH:
                self.flush_records(obj["collection"])
        elif kind in _GRAPH_TABLES:
            table = _GRAPH_TABLES[kind]
            self.graph_rows[table].append(obj["row"])
            if len(self.graph_rows[table]) >= BATCH:
                self.flush_graph(table)

    def flush_records(self, name: str) -> None:
        batch = self.records.pop(name, [])
        if batch:
            self.targets[name].upsert(
                ids=[r["id"] for r in batch],
                documents=[r["document"] for r in batch],
                metadatas=[r.get("metadata") or {} for r in batch],
                embeddings=[r["embedding"] for r in batch],
            )
            written = self.report.written
            written[name] = written.get(name, 0) + len(batch)
            if self.progress:
                self.progress(name, written[name])

    def flush_graph(self, table: str) -> None:
        batch, self.graph_rows[table] = self.graph_rows[table], []
        if batch:
            write_batch(self.kg, table, batch)
            self.report.written[table] = self.report.written.get(table, 0) + len(batch)

    def flush_all(self) -> None:
        for name in list(self.records):
            self.flush_records(name)
        self.flush_graph("entities")
        self.flush_graph("triples")


__all__ = [
    "export_palace",
    "import_palace",
    "check_file",
    "ExportFormatError",
    "PalaceImportReport",
    "FORMAT",
]
