"""The drawer store: MemPalace's ``postgres`` backend and its collections (records, filters, vector
index segments, bulk loading). It builds on :mod:`mempalace_pg.db` and knows nothing of the graph."""
