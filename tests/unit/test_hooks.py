"""mempalace_pg.hooks: MemPalace's names adapted for postgres palaces from the moment Python starts."""

from __future__ import annotations

import subprocess
import sys


def test_hooks_are_installed_when_python_starts(tmp_path):
    """A fresh interpreter has the import hook before anything imports MemPalace, and MemPalace's names
    are the adapted ones as soon as its modules load, in the order `mempalace kg normalize` loads them."""
    code = (
        "import sys\n"
        "assert not any(m.startswith('mempalace.') for m in sys.modules)\n"
        "from mempalace.kg_normalize import off_vocabulary_facts\n"
        "from mempalace.knowledge_graph import KnowledgeGraph\n"
        "from mempalace.palace_audit import resolve_kg_path, _read_kg\n"
        "import mempalace.palace as palace, mempalace.palace_graph as graph\n"
        "from mempalace_pg.graph.routing import KnowledgeGraph as Router\n"
        "assert KnowledgeGraph is Router, KnowledgeGraph\n"
        "for f in (off_vocabulary_facts, resolve_kg_path, _read_kg, graph.sqlite_grouped_counts_reader):\n"
        "    assert hasattr(f, '__wrapped__'), f\n"
        "assert 'postgres' in palace._MULTI_PROCESS_WRITER_BACKENDS\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
