"""MemPalace's backend contract (``mempalace.backends.base``), loaded without its package.

The plugin's errors and its backend derive from classes in ``mempalace.backends.base``, a module of the
standard library only. Importing it the usual way first runs the ``mempalace.backends`` package, which
imports every backend MemPalace ships (Chroma, Milvus, Qdrant, ...): the larger part of the start of a
process that never uses them, as the plugin's own commands and its index folder do not. :func:`load`
puts the module in ``sys.modules`` under its own name on its own; a later import of the package (a
MemPalace command, ``migrate``) runs the package as usual, and the package finds and reuses this module,
so every class is the one MemPalace raises and checks.
"""

from __future__ import annotations

import importlib.util
import os
import sys

NAME = "mempalace.backends.base"


def load() -> None:
    """Load ``mempalace.backends.base`` on its own unless it is imported already (or MemPalace is not
    installed: the usual import then fails with its own message)."""
    if NAME in sys.modules:
        return
    package = importlib.util.find_spec("mempalace")
    if package is None or not package.submodule_search_locations:
        return
    path = os.path.join(list(package.submodule_search_locations)[0], "backends", "base.py")
    if not os.path.isfile(path):
        return
    spec = importlib.util.spec_from_file_location(NAME, path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[NAME]
        raise


def adopt(package) -> None:
    """Bind the module as an attribute of ``package`` (``mempalace.backends``, just run): a submodule
    already in ``sys.modules`` when its package runs is found by the package's imports but not bound on
    it, and ``mempalace.backends.base.X`` must still resolve."""
    module = sys.modules.get(NAME)
    if module is not None and getattr(package, "base", None) is None:
        package.base = module


__all__ = ["load", "adopt", "NAME"]
