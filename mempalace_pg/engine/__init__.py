"""The segmented vector-index engine: a collection's vector index as HNSW segments over ranges of write
order, built off the write path by a folder process, and the nearest-vector statement over them.

It takes a ``Database`` and a collection's pk (:class:`~mempalace_pg.engine.indexing.SegmentIndex`), or a
connection, a schema and a pk, and never imports :mod:`mempalace_pg.store`, which keeps MemPalace's
collection API on top of it. The policy is described in :mod:`mempalace_pg.engine.indexing`.
"""
