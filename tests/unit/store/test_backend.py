"""The backend class MemPalace finds (mempalace_pg.store.backend), before it opens any database."""

from __future__ import annotations

from mempalace.backends.registry import get_backend_class

from mempalace_pg.marker import MARKER_FILENAME
from mempalace_pg.store.backend import PostgresBackend


def test_registered_as_mempalace_backend():
    assert get_backend_class("postgres") is PostgresBackend
    assert "supports_namespace_isolation" in PostgresBackend.capabilities


def test_mempalace_treats_backend_as_multi_writer(tmp_path):
    """MemPalace would lock `mine` out while an MCP server writes; PostgreSQL coordinates writers."""
    import mempalace.palace as palace_module
    from mempalace.palace import backend_requires_single_writer

    PostgresBackend.detect(str(tmp_path))
    assert "postgres" in palace_module._MULTI_PROCESS_WRITER_BACKENDS
    assert backend_requires_single_writer("postgres") is False


def test_detect_is_true_exactly_for_a_directory_holding_the_marker(tmp_path):
    assert PostgresBackend.detect(str(tmp_path)) is False
    (tmp_path / MARKER_FILENAME).write_text("{}")
    assert PostgresBackend.detect(str(tmp_path)) is True
    assert PostgresBackend.detect(str(tmp_path / "missing")) is False
    assert PostgresBackend.detect("bad\x00path") is False  # refused by the OS, never an exception
