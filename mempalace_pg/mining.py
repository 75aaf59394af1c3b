"""MemPalace's source-adapter mining on a postgres palace: each source item's drawers and facts commit
together, or not at all, and the facts point at their drawers.

``mempalace mine DIR --source NAME`` (MemPalace 3.11, RFC 002) hands an adapter a ``PalaceContext``: the
adapter yields drawers, which core files through ``PalaceContext.upsert_drawer``, and writes facts
through ``PalaceContext.knowledge_graph`` as it goes. MemPalace writes each of them on its own, so an
adapter that fails in the middle of an item leaves part of it behind (some drawers, some facts) and a
fact names no drawer unless the adapter computed core's drawer id itself.

On a postgres palace, while :func:`mine_source_adapter` runs, each item is one transaction
(:meth:`~mempalace_pg.db.pool.Database.held`):

* an **item** is the run of writes that share a source file: a drawer's ``source_file``, or a fact's
  ``source_file`` argument. A write naming another source file commits the item before it and begins
  the next; a fact naming none belongs to the item in progress. The item in progress commits when the
  adapter is done, and is rolled back if the adapter (or core) raises: the items before it stay filed,
  the failed one leaves nothing, and running the mine again files it whole;
* a fact that names no ``source_drawer_id`` is given the item's first drawer as its evidence: at once
  when the item has filed a drawer already, else when its first drawer is filed. A fact that names
  one keeps it;
* reads an adapter makes meanwhile (drawers, facts) run in the same transaction and see the item's own
  writes.

A dry run, and a palace on any other backend, are left to MemPalace as they are.
"""

from __future__ import annotations

import inspect
import sys
from contextlib import ExitStack
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

_MINING: ContextVar[Optional["ItemTransactions"]] = ContextVar("mempalace_pg_mining", default=None)


def _is_age_graph(kg: Any) -> bool:
    """``kg`` is a postgres palace's graph. Asked without importing the graph (psycopg and the pool):
    MemPalace's CLI imports this module at its start, and a process that never opened one has none."""
    module = sys.modules.get("mempalace_pg.graph.kg")
    return module is not None and isinstance(kg, module.AgeKnowledgeGraph)


class ItemTransactions:
    """The items of one mine: one held transaction per item, opened by its first write."""

    def __init__(self) -> None:
        self.kg: Optional["AgeKnowledgeGraph"] = None
        self._stack: Optional[ExitStack] = None
        self._item: Optional[str] = None
        self.drawer: Optional[str] = None  # the item's first drawer: its facts' evidence
        self._unlinked: list[str] = []  # the item's facts added before its first drawer

    def attach(self, kg: Any) -> bool:
        """Use ``kg`` (the context's knowledge graph) if it is a postgres palace's graph."""
        if self.kg is None and _is_age_graph(kg):
            self.kg = kg
        return self.kg is not None and kg is self.kg

    def before_write(self, source_file: Optional[str]) -> None:
        """A write of ``source_file`` (None: of the item in progress) is about to be made."""
        if self._stack is not None and source_file is not None and self._item not in (None, source_file):
            self.commit()
        if self._stack is None:
            stack = ExitStack()
            stack.enter_context(self.kg.database().held())
            self._stack = stack
            # An adapter adds an item's facts one by one, so the item cannot lock its entities up front:
            # it takes the palace's graph, first, before any row (docs/architecture.md, "Lock order").
            self.kg.lock()
        if self._item is None:
            self._item = source_file

    def drawer_filed(self, drawer_id: str) -> None:
        if self.drawer is None:
            self.drawer = drawer_id
            if self._unlinked:
                self.kg.link_evidence(self._unlinked, drawer_id)
                self._unlinked = []

    def fact_filed(self, triple_id: Optional[str], linked: bool) -> None:
        if not linked and triple_id is not None:
            self._unlinked.append(triple_id)

    def _end_item(self) -> Optional[ExitStack]:
        """Forget the item in progress; its held transaction, still open, for the caller to end."""
        stack, self._stack = self._stack, None
        self._item, self.drawer, self._unlinked = None, None, []
        return stack

    def commit(self) -> None:
        """Commit the item in progress (if any)."""
        stack = self._end_item()
        if stack is not None:
            stack.close()

    def rollback(self, exc: BaseException) -> None:
        """Roll the item in progress back (if any)."""
        stack = self._end_item()
        if stack is not None:
            stack.__exit__(type(exc), exc, exc.__traceback__)

    def finish(self, exc: Optional[BaseException]) -> None:
        if exc is None:
            self.commit()
        else:
            self.rollback(exc)


class ItemDrawers:
    """The context's drawer collection, its writes made inside the item they belong to."""

    def __init__(self, collection: Any, items: ItemTransactions):
        self._collection = collection
        self._items = items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)

    def _write(self, method: Callable, ids, metadatas, kwargs) -> Any:
        first = (metadatas or [None])[0] or {}
        self._items.before_write(first.get("source_file"))
        result = method(ids=ids, metadatas=metadatas, **kwargs)
        if ids:
            self._items.drawer_filed(ids[0])
        return result

    def upsert(self, *, ids, metadatas=None, **kwargs) -> Any:
        return self._write(self._collection.upsert, ids, metadatas, kwargs)

    def add(self, *, ids, metadatas=None, **kwargs) -> Any:
        return self._write(self._collection.add, ids, metadatas, kwargs)


class ItemGraph:
    """The context's knowledge graph, its writes made inside the item they belong to and linked to the
    item's first drawer."""

    def __init__(self, kg: "AgeKnowledgeGraph", items: ItemTransactions):
        self._kg = kg
        self._items = items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kg, name)

    def _linked_write(self, method: Callable, *args, **kwargs) -> Any:
        bound = inspect.signature(method).bind(*args, **kwargs)
        given = bound.arguments
        self._items.before_write(given.get("source_file"))
        linked = given.get("source_drawer_id") is not None
        if not linked and self._items.drawer is not None:
            given["source_drawer_id"] = self._items.drawer
            linked = True
        triple_id = method(*bound.args, **bound.kwargs)
        self._items.fact_filed(triple_id, linked)
        return triple_id

    def add_triple(self, *args, **kwargs) -> str:
        return self._linked_write(self._kg.add_triple, *args, **kwargs)

    def supersede(self, *args, **kwargs) -> str:
        return self._linked_write(self._kg.supersede, *args, **kwargs)

    def invalidate(self, *args, **kwargs) -> None:
        self._items.before_write(None)
        return self._kg.invalidate(*args, **kwargs)

    def add_entity(self, *args, **kwargs) -> str:
        self._items.before_write(None)
        return self._kg.add_entity(*args, **kwargs)

    def close(self) -> None:
        # MemPalace closes the graph in the `finally` of its mine, after the adapter's last item or as
        # an error passes: the item in progress commits, or is rolled back, while the mine's lock is
        # still held.
        self._items.finish(sys.exc_info()[1])
        self._kg.close()


def item_context(base: type) -> type:
    """MemPalace's ``PalaceContext`` class, made to file each item in one transaction while
    :func:`mine_source_adapter` runs on a postgres palace (``base`` itself if it is made so already)."""
    if getattr(base, "files_items_atomically", False):
        return base

    class PalaceContext(base):
        files_items_atomically = True
        __doc__ = base.__doc__

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            items = _MINING.get()
            if items is not None and items.attach(self.knowledge_graph):
                self.knowledge_graph = ItemGraph(self.knowledge_graph, items)
                self.drawer_collection = ItemDrawers(self.drawer_collection, items)

    PalaceContext.__module__ = base.__module__
    PalaceContext.__qualname__ = base.__qualname__
    return PalaceContext


def item_mining(original: Callable) -> Callable:
    """MemPalace's ``mine_source_adapter``, each item of a postgres palace in one transaction."""

    def mine_source_adapter(*args, **kwargs):
        items = ItemTransactions()
        token = _MINING.set(items)
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            items.rollback(exc)
            raise
        finally:
            _MINING.reset(token)
        items.commit()
        return result

    return mine_source_adapter


__all__ = ["ItemTransactions", "ItemDrawers", "ItemGraph", "item_context", "item_mining"]
