"""chromadb imported when Chroma is used, not when MemPalace starts.

MemPalace's backends package imports its Chroma backend whatever the palace's backend, and that module
imports ``chromadb`` at its top: every ``mempalace`` command and MCP server on a postgres palace spends
most of its start importing a database it never opens. Python cannot skip the import, but it can
defer the package's body:

- ``import chromadb`` gives the package module with its ``__path__`` set and its ``__init__`` not yet
  run; the first attribute asked of it (``chromadb.PersistentClient``) runs it, once, in place: every
  name bound to the module sees the real one.
- ``chromadb.errors``, whose ``NotFoundError`` MemPalace binds at import time for its ``except``
  clauses, loads as itself: it needs nothing of the package's body, and when that runs later it finds
  the module in ``sys.modules``, so the class is the one Chroma raises.
- ``chromadb.config`` (pydantic-settings underneath, most of what is left) is deferred too. MemPalace
  binds its ``Settings`` and calls it once at import time (its client settings); until the module runs,
  ``Settings`` is a stand-in that records the call. When the module runs (at the package's body, or
  any other name asked of it), every module global holding the stand-in or a settings object it made
  is given the real class or a real ``Settings`` made with the same arguments. MemPalace reads its
  settings object only as an argument of ``chromadb.PersistentClient(...)``, whose callee is evaluated,
  and so the package's body run, before the argument is.
- Any other ``chromadb.*`` import runs the package's body first, as an ordinary import would.

So a process that uses Chroma (a Chroma palace, ``migrate`` from one) imports it at its first use, in
the order Chroma expects; a process that never does imports only ``chromadb.errors``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import threading
import types

from mempalace_pg.patching import find_with_others

PACKAGE = "chromadb"
CONFIG = "chromadb.config"
#: Submodules that load as themselves, without the package's body: what MemPalace binds at import time,
#: and the optional module ``chromadb.config`` looks for (absent in the full client, an ``ImportError``
#: it catches).
LIGHT = frozenset({"chromadb.errors", "chromadb.is_thin_client"})


class PendingSettings:
    """``chromadb.config.Settings`` until its module has run: records the call. Used before that (an
    attribute asked of it), it runs the module and answers as the real settings object."""

    def __init__(self, *args, **kwargs):
        self._call = (args, kwargs)
        self._real = None

    def real(self, cls):
        if self._real is None:
            args, kwargs = self._call
            self._real = cls(*args, **kwargs)
        return self._real

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        config = importlib.import_module(CONFIG)
        _run_deferred(config)
        return getattr(self.real(config.Settings), name)


def _bind_real_settings(cls) -> None:
    """Every module global holding the stand-in class, or a settings object it made, gets the real one."""
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict) or names is globals():  # this module keeps its own class
            continue
        for name, value in list(names.items()):
            if value is PendingSettings:
                names[name] = cls
            elif type(value) is PendingSettings:
                names[name] = value.real(cls)


class _Deferred(types.ModuleType):
    """A module before its body has run; asking for a name it lacks runs the body (or, for the stand-ins
    its loader holds while the package waits, answers with one)."""

    def __getattr__(self, name):
        if name == "__path__":
            # importlib asks every module it imports names from whether it is a package; a module that
            # is not has no __path__, run or not
            raise AttributeError(name)
        loader = self.__spec__.loader
        if isinstance(loader, _DeferredLoader):
            stand_in = loader.stand_in(name)
            if stand_in is not None:
                return stand_in
            if loader.run(self):
                return getattr(self, name)
        raise AttributeError(f"partially initialized module {self.__name__!r} has no attribute {name!r}")


class _DeferredLoader(importlib.abc.Loader):
    """Creates the module as the real loader would, and runs its body on first use."""

    def __init__(self, loader, stand_ins: dict | None = None, after=None):
        self._loader = loader
        self._lock = threading.RLock()
        self._running = False
        self._stand_ins = stand_ins or {}
        self._after = after  # called with the module once its body has run

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__class__ = _Deferred

    def stand_in(self, name: str):
        """What stands for ``name`` while the package's body has not run (None: nothing does)."""
        if name not in self._stand_ins or not deferred() or self._running:
            return None
        return self._stand_ins[name]

    def run(self, module) -> bool:
        """Run the module's body in ``module`` (once); False while it is running in this thread, as
        a partially initialized module answers."""
        with self._lock:
            if type(module) is not _Deferred:
                return True
            if self._running:
                return False
            self._running = True
            try:
                if module.__name__ == PACKAGE:
                    # the package's body reads chromadb.config's names: the real ones, first
                    _run_deferred(sys.modules.get(CONFIG))
                self._loader.exec_module(module)
            except BaseException:
                # as a failed import would: the next import starts again, and says why
                if sys.modules.get(module.__name__) is module:
                    del sys.modules[module.__name__]
                raise
            finally:
                self._running = False
                module.__class__ = types.ModuleType
            if self._after is not None:
                self._after(module)
            return True

    def __getattr__(self, attr):  # get_source, is_package, get_resource_reader, ...
        return getattr(self._loader, attr)


def _run_deferred(module) -> None:
    """Run ``module``'s body now if it is still deferred (a module that ran, or None, is left as it is)."""
    if type(module) is _Deferred:
        module.__spec__.loader.run(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == PACKAGE or (fullname == CONFIG and deferred()):
            spec = find_with_others(self, fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                if fullname == CONFIG:
                    spec.loader = _DeferredLoader(
                        spec.loader, {"Settings": PendingSettings}, lambda m: _bind_real_settings(m.Settings)
                    )
                else:
                    spec.loader = _DeferredLoader(spec.loader)
            return spec
        if fullname.startswith(PACKAGE + ".") and fullname not in LIGHT:
            _run_deferred(sys.modules.get(PACKAGE))
        return None


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once). A ``chromadb`` already imported stays as it is."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def deferred() -> bool:
    """``chromadb`` is imported but its package body has not run (what a postgres palace's process
    should see at its end)."""
    return type(sys.modules.get(PACKAGE)) is _Deferred


__all__ = ["install", "deferred", "PendingSettings", "PACKAGE", "CONFIG", "LIGHT"]
