"""``PalaceSearch``: the four retrievals of one postgres palace, one class (each retrieval in its module)."""

from __future__ import annotations

from mempalace_pg.retrieval.around import AroundEntity
from mempalace_pg.retrieval.entities import EntitiesForQuery
from mempalace_pg.retrieval.facts import FactsWithEvidence
from mempalace_pg.retrieval.hybrid import HybridSearch


class PalaceSearch(AroundEntity, FactsWithEvidence, EntitiesForQuery, HybridSearch):
    """Graph-and-vector retrieval over one postgres palace (its drawers and its AGE graph).

    Build it like :class:`~mempalace_pg.graph.kg.AgeKnowledgeGraph`: with the palace directory, or with
    ``palace_key`` (and ``namespace``) for a palace without one.
    """


__all__ = ["PalaceSearch"]
