"""mempalace_pg.hooks: MemPalace's names adapted for postgres palaces from the moment Python starts."""

from __future__ import annotations

from fresh_python import last_line


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
        "from mempalace.config import MempalaceConfig\n"
        "import mempalace.cli as cli\n"
        "for f in (MempalaceConfig.set_backend, cli.cmd_serve):\n"
        "    assert hasattr(f, '__wrapped__'), f\n"
        "print('ok')\n"
    )
    assert last_line(code) == "ok"


def test_the_global_palace_of_a_serve_command_line():
    """What MemPalace's parser drops for `serve`: the --palace given before the subcommand, and only that."""
    from mempalace_pg.hooks import global_palace

    assert global_palace(["--palace", "/p", "serve", "--port", "9000", "--token", "t"]) == "/p"
    assert global_palace(["--backend", "postgres", "--palace=/p", "serve", "--read-only"]) == "/p"
    assert global_palace(["--pal", "/p", "serve"]) == "/p"  # argparse's abbreviations, as MemPalace's parser
    # with both, serve's own --palace is in args and wins; the hook reads the global one only without it
    assert global_palace(["--palace", "/p", "serve", "--palace", "/q"]) == "/p"
    assert global_palace(["serve", "--palace", "/q"]) is None
    assert global_palace(["--palace", "/p", "init", "/dir"]) is None  # not a serve command line
    assert global_palace(["-q", "tests/unit"]) is None  # e.g. pytest's own sys.argv
    assert global_palace([]) is None


def _init_then_set_backend(config_dir, backend: str) -> dict:
    """`mempalace init --backend B`'s two writes of config.json, in its order (cmd_init.py)."""
    import json

    from mempalace.config import MempalaceConfig

    cfg = MempalaceConfig(config_dir=str(config_dir))
    cfg.init()
    cfg.set_backend(backend)
    return json.loads((config_dir / "config.json").read_text())


def test_init_backend_postgres_keeps_the_config_init_wrote(tmp_path):
    chroma = _init_then_set_backend(tmp_path / "chroma", "chroma")
    postgres = _init_then_set_backend(tmp_path / "postgres", "postgres")
    # MemPalace 3.11's own behaviour, left as it is for every other backend: set_backend writes over
    # the defaults init() has just written
    assert chroma == {"backend": "chroma"}
    assert set(postgres) == {"palace_path", "collection_name", "topic_wings", "hall_keywords", "backend"}
    assert postgres["palace_path"] == str(tmp_path / "postgres" / "palace")
    assert postgres["backend"] == "postgres"


def test_an_existing_config_json_is_left_as_mempalace_leaves_it(tmp_path):
    import json

    (tmp_path / "config.json").write_text(json.dumps({"palace_path": "/elsewhere", "collection_name": "c"}))
    written = _init_then_set_backend(tmp_path, "postgres")
    assert written == {"palace_path": "/elsewhere", "collection_name": "c", "backend": "postgres"}
