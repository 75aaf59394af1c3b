"""mempalace_pg.backend_base: the plugin's own commands load MemPalace's backend base alone, and MemPalace's
backends package, imported later in the same process, reuses it: one class of each error, one registry."""

from __future__ import annotations

from fresh_python import last_line


def test_the_plugins_commands_start_without_mempalaces_backends_and_the_package_still_works():
    code = (
        "import sys\n"
        "from mempalace_pg.cli import main\n"
        "from mempalace_pg import backend_base\n"
        "backend_base.load()\n"
        "import mempalace_pg.store.backend, mempalace_pg.retrieval, mempalace_pg.graph.kg\n"
        "import mempalace_pg.atomic\n"
        "assert 'mempalace.backends' not in sys.modules and 'chromadb' not in sys.modules\n"
        "import mempalace.backends as package\n"
        "import mempalace.backends.base\n"
        "from mempalace_pg.errors import BusyError\n"
        "from mempalace_pg.store.backend import PostgresBackend\n"
        "assert package.base is sys.modules['mempalace.backends.base'] is mempalace.backends.base\n"
        "assert issubclass(BusyError, package.BackendError)\n"
        "assert package.get_backend_class('postgres') is PostgresBackend\n"
        "print('ok')\n"
    )
    assert last_line(code) == "ok"
