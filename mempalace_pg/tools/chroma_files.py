"""Reading a Chroma palace from its files, one page at a time, without Chroma loading its index.

``mempalace-pg migrate`` uses this for Chroma palaces: Chroma's own reader loads a collection's whole
vector index into memory before it returns the first embedding (benchmarks/RESULTS.md, the migration
table), so a migration through it grows with the palace. Read from the files instead, only an id map
and a label per vector stay in memory; records, documents and vectors pass through a page at a time.

What is read (the layout Chroma 1.x writes; anything else raises :class:`ChromaFormatError`, and the
caller falls back to Chroma's own reader):

* ``chroma.sqlite3``: collections and their segments; the metadata segment's records
  (``embeddings``), their metadata and document (``embedding_metadata``, key ``chroma:document``;
  list values in ``embedding_metadata_array``); and the write-ahead log (``embeddings_queue``),
  whose entries the vector segment has not taken in yet.
* the vector segment's directory (hnswlib's files as Chroma writes them): ``header.bin`` (layout),
  ``data_level0.bin`` (per element: links, the unit-length vector, the label), ``length.bin`` (each
  vector's original length, by which Chroma scales the stored unit vector back), and
  ``index_metadata.pickle`` (record id to label). The pickle is read by an unpickler that builds
  plain dicts, ints and strings only, never objects.

Vectors come out exactly as Chroma's ``get`` returns them (unit vector times stored length, in float32);
the test suite checks that against Chroma's reader on palaces with pending log entries, updates and
deletes. Never writes: the database is opened read-only and immutable (``migrate`` reads a snapshot).
"""

from __future__ import annotations

import os
import pickle
import sqlite3
import struct
from typing import Iterator, Optional

import numpy as np

#: hnswlib's header as Chroma's persistent index writes it (format version 1).
_HEADER = struct.Struct("<iQQQQQQiiQQQdQ")
_OP_ADD, _OP_UPDATE, _OP_UPSERT, _OP_DELETE = 0, 1, 2, 3
_DOCUMENT_KEY = "chroma:document"
_CHUNK = 4096  # elements per read while mapping labels


class ChromaFormatError(Exception):
    """The files are not in a layout this reader knows (the caller should use Chroma's reader)."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):  # dicts, lists, ints and strings need no class lookup
        raise ChromaFormatError(
            f"index_metadata.pickle holds a {module}.{name} object (an older Chroma layout)"
        )


def _connect(palace_dir: str) -> sqlite3.Connection:
    path = os.path.join(palace_dir, "chroma.sqlite3")
    if not os.path.isfile(path):
        raise ChromaFormatError(f"{path} does not exist")
    uri = "file:" + _uri_path(path) + "?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True)


def _uri_path(path: str) -> str:
    from urllib.parse import quote

    return quote(os.path.abspath(path))


class ChromaPalaceFiles:
    """A Chroma palace directory, read-only. ``collection(name)`` gives one collection's reader."""

    def __init__(self, palace_dir: str):
        self.palace_dir = palace_dir
        self.db = _connect(palace_dir)
        try:
            self.db.execute("SELECT id, name, dimension FROM collections LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            self.db.close()
            raise ChromaFormatError(f"chroma.sqlite3 has no collections table as expected ({exc})") from None

    def has_collection(self, name: str) -> bool:
        return self.db.execute("SELECT 1 FROM collections WHERE name = ?", (name,)).fetchone() is not None

    def collection(self, name: str) -> "ChromaCollectionFiles":
        row = self.db.execute("SELECT id, dimension FROM collections WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise ChromaFormatError(f"no collection {name!r} in chroma.sqlite3")
        return ChromaCollectionFiles(self, name, row[0], row[1])

    def embedder_identity(self, name: str):
        """The embedder identity MemPalace recorded for collection ``name`` (its sidecar file), or None."""
        # MemPalace's reader of its own sidecar file: the one definition of that format
        from mempalace.backends._sidecar import (  # noqa: PLC2701
            EMBEDDER_SIDECAR_FILENAME,
            read_embedder_sidecar,
        )

        return read_embedder_sidecar(os.path.join(self.palace_dir, EMBEDDER_SIDECAR_FILENAME), name)

    def close(self) -> None:
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class ChromaCollectionFiles:
    """One collection: :meth:`count`, :meth:`pages` (every record, in pages) and :meth:`records`."""

    def __init__(self, palace: ChromaPalaceFiles, name: str, collection_id: str, dimension: Optional[int]):
        self.name = name
        self.db = palace.db
        self._palace = palace
        segments = dict(
            self.db.execute("SELECT scope, id FROM segments WHERE collection = ?", (collection_id,))
        )
        if "METADATA" not in segments or "VECTOR" not in segments:
            raise ChromaFormatError(
                f"collection {name!r}: segments {sorted(segments)}, expected METADATA and VECTOR"
            )
        self.metadata_segment, self.vector_segment = segments["METADATA"], segments["VECTOR"]
        seqs = dict(
            self.db.execute(
                "SELECT segment_id, seq_id FROM max_seq_id WHERE segment_id IN (?, ?)",
                (self.metadata_segment, self.vector_segment),
            )
        )
        self.metadata_seq = int(seqs.get(self.metadata_segment) or 0)
        self.vector_seq = int(seqs.get(self.vector_segment) or 0)
        self.has_arrays = (
            self.db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'embedding_metadata_array'"
            ).fetchone()
            is not None
        )
        self.dimension = dimension
        self._log_vectors, self._log_deleted = self._read_log(collection_id)
        self._index = _VectorIndex(os.path.join(palace.palace_dir, self.vector_segment), dimension)

    # -- the write-ahead log ----------------------------------------------------------------------
    def _read_log(self, collection_id: str) -> tuple[dict, set]:
        """Vectors the log holds beyond what the vector segment took in (by record id), and deletions."""
        topics = [
            t
            for (t,) in self.db.execute("SELECT DISTINCT topic FROM embeddings_queue")
            if t.rsplit("/", 1)[-1] == collection_id
        ]
        vectors: dict = {}
        deleted: set = set()
        for topic in topics:
            pending_metadata = self.db.execute(
                "SELECT count(*) FROM embeddings_queue WHERE topic = ? AND seq_id > ?",
                (topic, self.metadata_seq),
            ).fetchone()[0]
            if pending_metadata:
                raise ChromaFormatError(
                    f"collection {self.name!r}: {pending_metadata} log entries not yet "
                    "in the metadata segment (Chroma was stopped mid-write)"
                )
            rows = self.db.execute(
                "SELECT operation, id, vector, encoding FROM embeddings_queue WHERE topic = ? AND seq_id > ? "
                "ORDER BY seq_id",
                (topic, self.vector_seq),
            )
            for op, rid, blob, encoding in rows:
                if op == _OP_DELETE:
                    vectors.pop(rid, None)
                    deleted.add(rid)
                elif op in (_OP_ADD, _OP_UPDATE, _OP_UPSERT):
                    if blob is None:
                        continue  # an update of metadata or document only
                    if (encoding or "").upper() != "FLOAT32":
                        raise ChromaFormatError(f"log vector encoding {encoding!r} (expected FLOAT32)")
                    vectors[rid] = np.frombuffer(blob, dtype="<f4").copy()
                    deleted.discard(rid)
                else:
                    raise ChromaFormatError(f"unknown log operation {op!r}")
        return vectors, deleted

    # -- records ----------------------------------------------------------------------------------
    def get_stored_embedder_identity(self):
        """As MemPalace's Chroma collection answers it (from the palace's embedder sidecar file)."""
        return self._palace.embedder_identity(self.name)

    def count(self) -> int:
        return self.db.execute(
            "SELECT count(*) FROM embeddings WHERE segment_id = ?", (self.metadata_segment,)
        ).fetchone()[0]

    def pages(self, page: int = 1000) -> Iterator[tuple[list, list, list, np.ndarray]]:
        """Every record as pages of ``(ids, documents, metadatas, embeddings)``, in the order written."""
        after = -1
        while True:
            rows = self.db.execute(
                "SELECT id, embedding_id FROM embeddings WHERE segment_id = ? AND id > ? ORDER BY id LIMIT ?",
                (self.metadata_segment, after, int(page)),
            ).fetchall()
            if not rows:
                return
            after = rows[-1][0]
            yield self._load(rows)

    def records(self, ids: list) -> tuple[list, list, list, np.ndarray]:
        """The records with these ids (those that exist), as one page."""
        rows = []
        for start in range(0, len(ids), 500):
            part = list(ids[start : start + 500])
            marks = ",".join("?" * len(part))
            rows += self.db.execute(
                f"SELECT id, embedding_id FROM embeddings WHERE segment_id = ? AND embedding_id IN ({marks}) "
                "ORDER BY id",
                (self.metadata_segment, *part),
            ).fetchall()
        return self._load(rows)

    def _load(self, rows: list) -> tuple[list, list, list, np.ndarray]:
        keys = [r[0] for r in rows]
        ids = [r[1] for r in rows]
        metas: dict = {k: {} for k in keys}
        docs: dict = {}
        marks = ",".join("?" * len(keys))
        for key_id, key, s, i, f, b in self.db.execute(
            f"SELECT id, key, string_value, int_value, float_value, bool_value FROM embedding_metadata "
            f"WHERE id IN ({marks})",
            keys,
        ):
            value = _value(s, i, f, b)
            if key == _DOCUMENT_KEY:
                docs[key_id] = value
            elif not key.startswith("chroma:"):
                metas[key_id][key] = value
        if self.has_arrays:
            for key_id, key, s, i, f, b in self.db.execute(
                "SELECT id, key, string_value, int_value, float_value, bool_value "
                f"FROM embedding_metadata_array WHERE id IN ({marks}) ORDER BY rowid",
                keys,
            ):
                metas[key_id].setdefault(key, []).append(_value(s, i, f, b))
        vectors = self._vectors(ids)
        return (ids, [docs.get(k) for k in keys], [metas[k] or None for k in keys], vectors)

    def _vectors(self, ids: list) -> np.ndarray:
        out = np.empty((len(ids), self._width(ids)), dtype=np.float32)
        from_index = []
        for row, rid in enumerate(ids):
            vec = self._log_vectors.get(rid)
            if vec is not None:
                out[row] = vec
            elif rid in self._log_deleted:
                raise ChromaFormatError(
                    f"record {rid!r} is deleted in the log but present in the metadata segment"
                )
            else:
                from_index.append((row, rid))
        if from_index:
            out[[r for r, _ in from_index]] = self._index.vectors([rid for _, rid in from_index])
        return out

    def _width(self, ids: list) -> int:
        if self.dimension:
            return int(self.dimension)
        if self._index.dimension:
            return self._index.dimension
        for rid in ids:
            if rid in self._log_vectors:
                return len(self._log_vectors[rid])
        raise ChromaFormatError(f"collection {self.name!r}: the vector width is not recorded")


def _value(s, i, f, b):
    if s is not None:
        return s
    if i is not None:
        return int(i)
    if f is not None:
        return float(f)
    if b is not None:
        return bool(b)
    return None


class _VectorIndex:
    """The stored vectors of one hnswlib index directory, read by label with positioned reads."""

    def __init__(self, directory: str, dimension: Optional[int]):
        self.directory = directory
        self.dimension = dimension
        self.count = 0
        header_path = os.path.join(directory, "header.bin")
        if not os.path.isfile(header_path):
            return  # nothing flushed yet: every vector is still in the log
        with open(header_path, "rb") as f:
            raw = f.read()
        if len(raw) != _HEADER.size:
            raise ChromaFormatError(f"{header_path}: {len(raw)} bytes, expected {_HEADER.size}")
        (version, offset_level0, _max, count, self.size, label_offset, self.offset_data, *_rest) = (
            _HEADER.unpack(raw)
        )
        if version != 1 or offset_level0 != 0:
            raise ChromaFormatError(f"{header_path}: format version {version}, expected 1")
        self.count = int(count)
        if self.count == 0:
            return
        width = (label_offset - self.offset_data) // 4
        if dimension is not None and width != dimension:
            raise ChromaFormatError(
                f"{header_path}: vectors of {width} dimensions, the collection says {dimension}"
            )
        if label_offset + 8 != self.size:
            raise ChromaFormatError(f"{header_path}: element layout not as expected")
        self.dimension = width
        self.label_offset = label_offset
        self.data_path = os.path.join(directory, "data_level0.bin")
        lengths_path = os.path.join(directory, "length.bin")
        if (
            os.path.getsize(self.data_path) < self.count * self.size
            or os.path.getsize(lengths_path) < 4 * self.count
        ):
            raise ChromaFormatError(
                f"{directory}: data files shorter than the header's {self.count} elements"
            )
        with open(lengths_path, "rb") as f:
            self.lengths = np.frombuffer(f.read(4 * self.count), dtype="<f4")
        self.labels = self._map_labels()
        self.id_to_label = self._read_id_map()

    def _map_labels(self) -> tuple[np.ndarray, np.ndarray]:
        """Live elements' labels, sorted, with their element numbers (deleted elements left out)."""
        labels = np.empty(self.count, dtype=np.uint64)
        live = np.empty(self.count, dtype=bool)
        with open(self.data_path, "rb") as f:
            for start in range(0, self.count, _CHUNK):
                n = min(_CHUNK, self.count - start)
                block = np.frombuffer(f.read(n * self.size), dtype=np.uint8).reshape(n, self.size)
                label_bytes = block[:, self.label_offset : self.label_offset + 8]
                labels[start : start + n] = label_bytes.copy().view("<u8").ravel()
                live[start : start + n] = (block[:, 2] & 1) == 0  # hnswlib's delete mark
        elements = np.flatnonzero(live)
        order = np.argsort(labels[elements], kind="stable")
        return labels[elements][order], elements[order]

    def _read_id_map(self) -> dict:
        path = os.path.join(self.directory, "index_metadata.pickle")
        try:
            with open(path, "rb") as f:
                data = _PlainUnpickler(f).load()
        except FileNotFoundError:
            raise ChromaFormatError(f"{path} is missing") from None
        except ChromaFormatError:
            raise
        except Exception as exc:  # any unreadable pickle means: not our layout
            raise ChromaFormatError(f"{path}: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("id_to_label"), dict):
            raise ChromaFormatError(f"{path}: no id_to_label map")
        return data["id_to_label"]

    def vectors(self, ids: list) -> np.ndarray:
        if not self.count:
            raise ChromaFormatError(f"{self.directory}: records {ids[:3]} have no stored vector")
        sorted_labels, elements = self.labels
        out = np.empty((len(ids), self.dimension), dtype=np.float32)
        nbytes = 4 * self.dimension
        fd = os.open(self.data_path, os.O_RDONLY)
        try:
            for row, rid in enumerate(ids):
                label = self.id_to_label.get(rid)
                pos = -1 if label is None else int(np.searchsorted(sorted_labels, label))
                if pos < 0 or pos >= len(sorted_labels) or int(sorted_labels[pos]) != label:
                    raise ChromaFormatError(f"record {rid!r} has no live vector in {self.directory}")
                element = int(elements[pos])
                raw = os.pread(fd, nbytes, element * self.size + self.offset_data)
                out[row] = np.frombuffer(raw, dtype="<f4") * self.lengths[element]
        finally:
            os.close(fd)
        return out


__all__ = ["ChromaFormatError", "ChromaPalaceFiles", "ChromaCollectionFiles"]
