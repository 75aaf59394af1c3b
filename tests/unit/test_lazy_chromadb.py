"""mempalace_pg.lazy_chromadb: MemPalace starts without running chromadb's body, and Chroma still works
in the same process, its errors the very classes MemPalace catches."""

from __future__ import annotations

from fresh_python import last_line


def test_mempalace_starts_with_chromadb_deferred():
    """What every MemPalace command and its MCP server import at their start leaves chromadb's package
    body unrun: only the two small modules whose classes MemPalace binds are loaded."""
    out = last_line(
        "import sys\n"
        "import mempalace.cli, mempalace.mcp_server, mempalace.searcher\n"
        "from mempalace.backends import get_backend, available_backends\n"
        "from mempalace_pg import lazy_chromadb\n"
        "assert lazy_chromadb.deferred()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'chromadb'))\n"
    )
    assert out == "['chromadb', 'chromadb.config', 'chromadb.errors']"


def test_chroma_is_used_in_the_same_process_after_a_deferred_start(tmp_path):
    """After MemPalace's start a Chroma palace opens: the package's body runs at its first use, and
    what Chroma raises is the class MemPalace's modules bound while the body was deferred."""
    out = last_line(
        "import mempalace.mcp_server as server, mempalace.backends.chroma as chroma\n"
        "from mempalace_pg import lazy_chromadb\n"
        "assert lazy_chromadb.deferred()\n"
        "import chromadb\n"
        f"client = chromadb.PersistentClient(path={str(tmp_path)!r})\n"
        "assert not lazy_chromadb.deferred()\n"
        "client.create_collection('drawers').add(ids=['a'], documents=['x'], embeddings=[[0.1, 0.2]])\n"
        "try:\n"
        "    client.get_collection('absent')\n"
        "except server._ChromaNotFoundError as exc:\n"
        "    assert type(exc).__module__ == 'chromadb.errors'\n"
        "    assert chroma._ChromaNotFoundError is server._ChromaNotFoundError\n"
        "print(client.get_collection('drawers').count())\n"
    )
    assert out == "1"


def test_a_submodule_import_runs_the_package_body_first():
    """Importing any other chromadb module runs the package's body before it, as an ordinary import
    of it would."""
    out = last_line(
        "import chromadb\n"
        "from mempalace_pg import lazy_chromadb\n"
        "assert lazy_chromadb.deferred()\n"
        "from chromadb.api.client import SharedSystemClient\n"
        "print(lazy_chromadb.deferred(), hasattr(chromadb, 'PersistentClient'))\n"
    )
    assert out == "False True"
