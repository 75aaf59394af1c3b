"""chromadb imported when Chroma is used, not when MemPalace starts.

MemPalace's backends package imports its Chroma backend whatever the palace's backend, and that module
imports ``chromadb`` at its top: every ``mempalace`` command and MCP server on a postgres palace spends
most of its start importing a database it never opens. Python cannot skip the import, but it can
defer the package's body:

- ``import chromadb`` gives the package module with its ``__path__`` set and its ``__init__`` not yet
  run; the first attribute asked of it (``chromadb.PersistentClient``) runs it, once, in place: every
  name bound to the module sees the real one.
- ``chromadb.errors`` and ``chromadb.config``, whose classes MemPalace binds at import time
  (``NotFoundError`` in ``except`` clauses, ``Settings``), load as themselves: they need nothing of the
  package's body, and when it runs later it finds them in ``sys.modules``, so every class is the one
  Chroma raises and uses.
- Any other ``chromadb.*`` import runs the package's body first, as an ordinary import would.

So a process that uses Chroma (a Chroma palace, ``migrate`` from one) imports it at its first use, in
the order Chroma expects; a process that never does imports only those two small modules.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
import types

from mempalace_pg.patching import find_with_others

PACKAGE = "chromadb"
#: Submodules that load without the package's body: what MemPalace binds at import time, and the
#: optional module ``chromadb.config`` looks for (absent in the full client, an ``ImportError`` it catches).
LIGHT = frozenset({"chromadb.errors", "chromadb.config", "chromadb.is_thin_client"})


class _Deferred(types.ModuleType):
    """The package before its body has run; asking for a name it lacks runs the body."""

    def __getattr__(self, name):
        loader = self.__spec__.loader
        if not isinstance(loader, _DeferredLoader) or not loader.run(self):
            raise AttributeError(f"partially initialized module {self.__name__!r} has no attribute {name!r}")
        return getattr(self, name)


class _DeferredLoader(importlib.abc.Loader):
    """Creates the package module as the real loader would, and runs its body on first use."""

    def __init__(self, loader):
        self._loader = loader
        self._lock = threading.RLock()
        self._running = False

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__class__ = _Deferred

    def run(self, module) -> bool:
        """Run the package's body in ``module`` (once); False while it is running in this thread, as
        a partially initialized module answers."""
        with self._lock:
            if type(module) is not _Deferred:
                return True
            if self._running:
                return False
            self._running = True
            try:
                self._loader.exec_module(module)
            except BaseException:
                # as a failed import would: the next import starts again, and says why
                if sys.modules.get(module.__name__) is module:
                    del sys.modules[module.__name__]
                raise
            finally:
                self._running = False
                module.__class__ = types.ModuleType
            return True

    def __getattr__(self, attr):  # get_source, is_package, get_resource_reader, ...
        return getattr(self._loader, attr)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == PACKAGE:
            spec = find_with_others(self, fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _DeferredLoader(spec.loader)
            return spec
        if fullname.startswith(PACKAGE + ".") and fullname not in LIGHT:
            package = sys.modules.get(PACKAGE)
            if type(package) is _Deferred:
                package.__spec__.loader.run(package)
        return None


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once). A ``chromadb`` already imported stays as it is."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def deferred() -> bool:
    """``chromadb`` is imported but its package body has not run (what a postgres palace's process
    should see at its end)."""
    return type(sys.modules.get(PACKAGE)) is _Deferred


__all__ = ["install", "deferred", "PACKAGE", "LIGHT"]
