"""The database layer: connecting, the pool, the versioned schema, and SQL helpers.

Nothing here imports from ``store``, ``graph``, ``tools`` or the modules above them."""
