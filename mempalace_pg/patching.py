"""The import hook that applies patches to MemPalace's modules, on the package's bottom floor.

A patch is a function that takes a MemPalace module just executed and adapts it. The patch bodies live
on the top floor (:mod:`mempalace_pg.hooks`, which knows the store and the graph); this module only
keeps the registered patches and runs each once per module object: right after the module is executed
(the finder on ``sys.meta_path``), or for a module imported before the hook was there, at
:func:`apply_pending`. Keeping the machinery here lets the backend (``store/``) call
:func:`apply_pending` without importing the floor above it.
"""

from __future__ import annotations

import importlib.abc
import logging
import sys
import threading
from typing import Callable

log = logging.getLogger(__name__)

#: MemPalace module name -> its patch; filled by :func:`register` (process-wide, never emptied).
_PATCHES: dict[str, Callable] = {}
#: (module name, id(module)) already patched: a reload executes a new module object, patched again.
_patched: set = set()
_lock = threading.RLock()


def register(patches: dict[str, Callable]) -> None:
    """Add ``patches`` (MemPalace module name -> patch) to those the hook applies."""
    with _lock:
        _PATCHES.update(patches)


def _apply(name: str, module) -> None:
    with _lock:
        if (name, id(module)) in _patched:
            return
        _patched.add((name, id(module)))
    try:
        _PATCHES[name](module)
    except Exception:  # a MemPalace we do not know must keep working without us
        log.warning("mempalace-pg could not adapt %s to postgres palaces", name, exc_info=True)


def _loaded(module) -> bool:
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False)


def apply_pending() -> None:
    """Patch every target module that has finished importing and is not patched yet."""
    for name in list(_PATCHES):
        module = sys.modules.get(name)
        if module is not None and _loaded(module) and (name, id(module)) not in _patched:
            _apply(name, module)


class _Loader(importlib.abc.Loader):
    """Runs the module's own loader, then its patch."""

    def __init__(self, loader, name: str):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        with _lock:
            _patched.discard((self._name, id(module)))  # a reload re-executes the module: patch it again
        _apply(self._name, module)

    def __getattr__(self, attr):  # get_source, get_resource_reader, is_package, ...
        return getattr(self._loader, attr)


def find_with_others(finder, fullname, path=None, target=None):
    """The spec the finders on ``sys.meta_path`` other than ``finder``'s kind find for ``fullname``: what
    an import hook that wraps a module's loader starts from."""
    for other in sys.meta_path:
        if isinstance(other, type(finder)):
            continue
        find = getattr(other, "find_spec", None)
        spec = find(fullname, path, target) if find else None
        if spec is not None:
            return spec
    return None


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the patched modules with the other finders and wraps their loaders in :class:`_Loader`."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _PATCHES:
            return None
        spec = find_with_others(self, fullname, path, target)
        if spec is None:
            return None
        if (
            spec.loader is not None
            and hasattr(spec.loader, "exec_module")
            and not isinstance(spec.loader, _Loader)
        ):
            spec.loader = _Loader(spec.loader, fullname)
        return spec


def install() -> None:
    """Put the import hook first on ``sys.meta_path`` (once) and patch what is already imported."""
    with _lock:
        if not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())
    apply_pending()


__all__ = ["register", "install", "apply_pending", "find_with_others"]
