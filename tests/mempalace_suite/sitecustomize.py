"""Imported at start by every Python process whose path holds this directory (the MemPalace test suite run
by tests/test_mempalace_kg_suite.py, and the subprocesses its tests start): every
``KnowledgeGraph(db_path=...)`` becomes the AGE graph of a palace keyed by that path (see age_graph.py)."""

import age_graph

age_graph.route_every_graph_to_age()
