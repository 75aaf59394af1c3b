"""The folder's process: ``python -m mempalace_pg.engine.folder_process SCHEMA COLLECTION_PK`` (the DSN in
MEMPALACE_PG_FOLDER_DSN), what :meth:`~mempalace_pg.engine.indexing.SegmentIndex.ensure_folder` starts.

It runs :func:`mempalace_pg.engine.folder.main` after loading MemPalace's ``mempalace.backends.base`` on
its own (:func:`load_backend_base`): the plugin's errors derive from its ``BackendError``, and importing
it the usual way first runs MemPalace's ``mempalace.backends`` package, which imports every backend
MemPalace ships, chromadb among them: CPU a folder, which never uses MemPalace, would spend each time it
starts (docs/testing.md), and a process that writes starts one per collection after each pause.
"""

from __future__ import annotations

import importlib.util
import os
import sys

#: The one MemPalace module the folder needs (through mempalace_pg.errors): standard library only.
BACKEND_BASE = "mempalace.backends.base"


def load_backend_base() -> None:
    """Load ``mempalace.backends.base`` under its own name without running its package's ``__init__``
    (a later import of ``mempalace.backends``, which a folder never makes, would find and reuse it)."""
    if BACKEND_BASE in sys.modules:
        return
    package = importlib.util.find_spec("mempalace")
    if package is None or not package.submodule_search_locations:
        return  # no MemPalace: the usual import fails later with its own message
    path = os.path.join(list(package.submodule_search_locations)[0], "backends", "base.py")
    spec = importlib.util.spec_from_file_location(BACKEND_BASE, path)
    if spec is None or spec.loader is None or not os.path.isfile(path):
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules[BACKEND_BASE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[BACKEND_BASE]
        raise


def run(argv: list[str]) -> int:
    """The folder, started lean (see the module's docstring)."""
    load_backend_base()
    from mempalace_pg.engine.folder import main

    return main(argv)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
