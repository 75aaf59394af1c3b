"""mempalace_pg.lazy_chromadb: MemPalace starts without running chromadb's body, and Chroma still works
in the same process, its errors the very classes MemPalace catches."""

from __future__ import annotations

from fresh_python import last_line


def test_mempalace_starts_with_chromadb_deferred():
    """What every MemPalace command and its MCP server import at their start leaves chromadb's package
    body unrun, and chromadb.config's (pydantic-settings): only chromadb.errors, whose class MemPalace
    binds, is loaded; MemPalace's client settings are a stand-in."""
    out = last_line(
        "import sys\n"
        "import mempalace.cli, mempalace.mcp_server, mempalace.searcher\n"
        "from mempalace.backends import get_backend, available_backends\n"
        "import mempalace.backends.chroma as chroma\n"
        "from mempalace_pg import lazy_chromadb\n"
        "assert lazy_chromadb.deferred()\n"
        "assert type(chroma._CLIENT_SETTINGS) is lazy_chromadb.PendingSettings\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('chromadb', 'pydantic_settings'))\n"
        "print(loaded, 'DEFAULT_TENANT' in vars(sys.modules['chromadb.config']))\n"
    )
    assert out == "['chromadb', 'chromadb.config', 'chromadb.errors'] False"


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


def test_mempalaces_chroma_client_gets_the_real_settings(tmp_path):
    """A Chroma palace opened through MemPalace's backend: its client settings, made at import while
    chromadb.config waited, are a real ``Settings`` with the arguments MemPalace gave, and the class it
    bound is the real one."""
    out = last_line(
        "import mempalace.backends.chroma as chroma\n"
        "from mempalace_pg import lazy_chromadb\n"
        f"client = chroma.ChromaBackend.make_client({str(tmp_path)!r})\n"
        "import chromadb.config\n"
        "assert chroma._ChromaSettings is chromadb.config.Settings\n"
        "assert type(chroma._CLIENT_SETTINGS) is chromadb.config.Settings\n"
        "assert client.get_settings().anonymized_telemetry is False\n"
        "print(lazy_chromadb.deferred(), chroma._CLIENT_SETTINGS.anonymized_telemetry)\n"
    )
    assert out == "False False"


def test_chromadb_config_asked_first_runs_alone_and_the_settings_follow():
    """Another name of chromadb.config asked before any Chroma use runs that module alone (the package
    stays deferred), and what MemPalace bound becomes real; a stand-in settings object used before
    that answers as the real one."""
    out = last_line(
        "import mempalace.backends.chroma as chroma\n"
        "from mempalace_pg import lazy_chromadb\n"
        "early = chroma._CLIENT_SETTINGS.anonymized_telemetry\n"
        "import chromadb.config as config\n"
        "tenant = config.DEFAULT_TENANT\n"
        "assert chroma._ChromaSettings is config.Settings\n"
        "assert type(chroma._CLIENT_SETTINGS) is config.Settings\n"
        "print(early, lazy_chromadb.deferred(), tenant)\n"
    )
    assert out == "False True default_tenant"
