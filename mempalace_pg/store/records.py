"""What a record is before it is written: its id, document, metadata and embedding, checked and made storable.

Every write path (``add``, ``upsert``, ``update``, bulk loads, units of work, ``migrate``, ``import``)
goes through :func:`clean_batch` or its parts, so they store the same thing for the same input:

* text is made storable as MemPalace's built-in ``pgvector`` backend makes it (NUL stripped, lone
  surrogates replaced: :mod:`mempalace_pg.text`), in ids, documents and metadata keys and values;
* metadata is what ``json.dumps`` would write: keys that are not strings become JSON's spelling of
  them, tuples become lists;
* what no MemPalace backend can store is refused with :class:`InvalidRecordError` (a ``ValueError``)
  naming the record, the field and what to do, before anything is written: a non-finite vector or
  metadata number, vectors of different widths, a metadata value JSON has no form for, a document
  that is not text, two ids that are one id once made storable.

Pure functions: nothing here talks to the database.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np
from mempalace.backends.base import DimensionMismatchError

from mempalace_pg.errors import InvalidRecordError
from mempalace_pg.text import storable

_NOTHING_WRITTEN = "nothing in this batch was written"


def _kind(value: Any) -> str:
    return "None" if value is None else f"of type {type(value).__name__}"


def _bad(record_id: Any, field: str, problem: str, fix: str) -> InvalidRecordError:
    return InvalidRecordError(f"record {record_id!r}: {field} {problem}; {fix} ({_NOTHING_WRITTEN})")


def clean_id(value: Any) -> str:
    """A record id as stored: a string, made storable."""
    if not isinstance(value, str):
        raise _bad(value, "id", f"is {_kind(value)}, not a string", "pass ids as str")
    return storable(value)


def clean_document(value: Any, record_id: Any) -> str:
    """A record's document as stored: a string, made storable."""
    if not isinstance(value, str):
        raise _bad(
            record_id,
            "document",
            f"is {_kind(value)}, not text",
            "pass each document as a str ('' for an empty one)",
        )
    return storable(value)


def _json_key(key: Any, record_id: Any, path: str) -> str:
    """A metadata key as JSON writes it (json.dumps turns 1 into "1", True into "true", None into "null")."""
    if isinstance(key, str):
        return storable(key)
    if isinstance(key, (bool, int, float)) or key is None:
        if isinstance(key, float) and not math.isfinite(key):
            raise _bad(record_id, f"{path} key", f"{key!r} is not a finite number", "use a string key")
        return next(iter(json.loads(json.dumps({key: 0}))))
    raise _bad(record_id, f"{path} key", f"{key!r} is {_kind(key)}", "use string keys")


def _json_value(value: Any, record_id: Any, path: str) -> Any:
    if isinstance(value, str):
        return storable(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _bad(
                record_id,
                path,
                f"is {value!r}, and JSON has no NaN or infinity",
                "store a finite number, a string, or leave the field out",
            )
        return value
    if isinstance(value, dict):
        out: dict = {}
        for key, item in value.items():
            key_text = _json_key(key, record_id, path)
            out[key_text] = _json_value(item, record_id, f"{path}.{key_text}")
        return out
    if isinstance(value, (list, tuple)):
        return [_json_value(item, record_id, f"{path}[{i}]") for i, item in enumerate(value)]
    raise _bad(
        record_id,
        path,
        f"is {_kind(value)}, which has no JSON form",
        "use str, int, float, bool, None, list or dict",
    )


def clean_metadata(value: Any, record_id: Any) -> dict:
    """A record's metadata as stored: a dict (None for {}), every string made storable, checked to be JSON."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad(record_id, "metadata", f"is {_kind(value)}", "pass a dict (or None)")
    return _json_value(value, record_id, "metadata")


def as_matrix(embeddings: Any, ids: Sequence, *, what: str = "embedding") -> np.ndarray:
    """Embeddings checked (one width, non-empty, finite numbers) as a float32 matrix, one row per id."""
    try:
        matrix = np.asarray(embeddings, dtype=np.float32)
    except (ValueError, TypeError):
        widths = sorted({len(e) for e in embeddings if hasattr(e, "__len__")})
        if len(widths) > 1:
            raise DimensionMismatchError(
                f"{what}s in one batch have different widths {widths}; every vector of a collection "
                f"must have the same dimension ({_NOTHING_WRITTEN})"
            ) from None
        raise InvalidRecordError(f"each {what} must be a list of numbers ({_NOTHING_WRITTEN})") from None
    if matrix.ndim != 2 or matrix.shape[1] == 0:
        raise InvalidRecordError(f"each {what} must be a non-empty list of numbers ({_NOTHING_WRITTEN})")
    if matrix.shape[0] != len(ids):
        raise InvalidRecordError(f"{len(ids)} ids but {matrix.shape[0]} {what}s ({_NOTHING_WRITTEN})")
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        bad = [ids[i] for i in np.flatnonzero(~finite)[:5]]
        raise InvalidRecordError(
            f"{what} of record(s) {bad} contain NaN or infinity (or a number too large for a 32-bit "
            f"float); embed the text again ({_NOTHING_WRITTEN})"
        )
    return matrix


def unique_ids(raw: Sequence[str], cleaned: Sequence[str]) -> None:
    """Refuse a batch in which two ids are the same id once made storable."""
    if len(set(cleaned)) == len(cleaned):
        return
    first: dict = {}
    for original, clean in zip(raw, cleaned):
        if clean in first:
            other = first[clean]
            if other == original:
                raise InvalidRecordError(
                    f"ids must be unique within a batch; repeated: [{original!r}] ({_NOTHING_WRITTEN})"
                )
            raise InvalidRecordError(
                f"ids {other!r} and {original!r} are the same id {clean!r} once NUL characters are removed "
                f"and lone surrogates replaced (PostgreSQL can store neither); give them distinct ids "
                f"({_NOTHING_WRITTEN})"
            )
        first[clean] = original


@dataclass
class Batch:
    """A checked batch: storable ids, documents and metadata, and the vectors as a float32 matrix."""

    ids: list
    documents: list
    metadatas: list
    matrix: np.ndarray

    @property
    def dimension(self) -> int:
        return int(self.matrix.shape[1])


def clean_batch(ids: Any, documents: Any, metadatas: Any, embeddings: Any) -> Batch:
    """Check and clean a batch for ``add``/``upsert`` (and the bulk paths); raises before any write."""
    if embeddings is None:
        raise ValueError("the postgres backend requires explicit embeddings (MemPalace supplies them)")
    if documents is None:
        raise ValueError("documents are required")
    raw_ids = list(ids)
    documents = list(documents)
    n = len(raw_ids)
    if len(documents) != n:
        raise ValueError(f"documents length {len(documents)} does not match ids length {n}")
    if metadatas is not None and len(metadatas) != n:
        raise ValueError(f"metadatas length {len(metadatas)} does not match ids length {n}")
    if len(embeddings) != n:
        raise ValueError(f"embeddings length {len(embeddings)} does not match ids length {n}")
    clean = [clean_id(i) for i in raw_ids]
    unique_ids(raw_ids, clean)
    docs = [clean_document(d, i) for i, d in zip(raw_ids, documents)]
    metas = [clean_metadata(metadatas[k] if metadatas is not None else None, raw_ids[k]) for k in range(n)]
    return Batch(clean, docs, metas, as_matrix(embeddings, raw_ids))


def clean_lookup_ids(ids: Any) -> Optional[list]:
    """Ids to look up or delete, made storable as written ids are (None stays None)."""
    if ids is None:
        return None
    return [storable(i) if isinstance(i, str) else i for i in ids]


__all__ = [
    "Batch",
    "clean_batch",
    "clean_id",
    "clean_document",
    "clean_metadata",
    "as_matrix",
    "unique_ids",
    "clean_lookup_ids",
]
