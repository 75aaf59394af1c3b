"""Run MemPalace's own knowledge-graph tests against the AGE graph (tests/test_mempalace_kg_suite.py).

Every ``KnowledgeGraph(db_path=...)`` those tests build, directly, through their fixtures or in the
subprocesses they start (``sitecustomize.py`` beside this file), becomes an
:class:`~mempalace_pg.graph.kg.AgeKnowledgeGraph` in the database ``MEMPALACE_PG_DSN`` / schema
``MEMPALACE_PG_SCHEMA`` name: one graph per path (a palace keyed by the path), so a test that reopens its
path finds its facts again and no two tests share a graph. Nothing else of MemPalace or of its tests is
changed. Loaded as a pytest plugin (``-p age_graph``), it checks that the routing is in place.
"""

from __future__ import annotations

import os

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))


def route_every_graph_to_age() -> None:
    from mempalace_pg.graph import routing

    def age_graph(cls, db_path=None):
        from mempalace import knowledge_graph as kgm

        from mempalace_pg.graph.kg import AgeKnowledgeGraph

        path = os.path.realpath(os.path.expanduser(db_path or kgm.DEFAULT_KG_PATH))
        return AgeKnowledgeGraph(db_path=db_path, palace_key=f"mempalace-kg-suite:{path}")

    routing.KnowledgeGraph.__new__ = age_graph


def pytest_configure(config):
    import mempalace.knowledge_graph as kgm

    from mempalace_pg.graph import routing

    route_every_graph_to_age()
    assert kgm.KnowledgeGraph is routing.KnowledgeGraph, "mempalace-pg's hooks are not installed"


@pytest.fixture(autouse=True)
def _subprocesses_route_to_age_too():
    """Keep this directory on PYTHONPATH for the subprocesses tests start (``mempalace.cli.main()``
    drops PYTHONPATH from the environment), so their KnowledgeGraph is the same AGE graph."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _HERE not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([_HERE, *paths])
    yield
