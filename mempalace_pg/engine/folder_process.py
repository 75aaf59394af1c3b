"""The folder's process: ``python -m mempalace_pg.engine.folder_process SCHEMA COLLECTION_PK`` (the DSN in
MEMPALACE_PG_FOLDER_DSN), what :meth:`~mempalace_pg.engine.indexing.SegmentIndex.ensure_folder` starts.

It runs :func:`mempalace_pg.engine.folder.main` after loading MemPalace's ``mempalace.backends.base`` on
its own (:func:`mempalace_pg.backend_base.load`), before anything can import it the usual way: the
backends package, which imports every backend MemPalace ships, is CPU a folder, which never uses
MemPalace, would spend each time it starts (docs/testing.md), and a process that writes starts one per
collection after each pause.
"""

from __future__ import annotations

import sys

from mempalace_pg import backend_base


def run(argv: list[str]) -> int:
    """The folder, started lean (see the module's docstring)."""
    backend_base.load()
    from mempalace_pg.engine.folder import main

    return main(argv)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
