"""The unit tier: no database, no server, and none of the integration tier's fixtures.

Every unit test runs with the plugin's settings cleared and MemPalace's config directory empty, so what it
asserts does not depend on the machine's environment or ~/.mempalace. The DSN points at a port nothing
listens on: a test that reaches for the database by mistake fails at once instead of using a real one.
"""

from __future__ import annotations

import os

import pytest

#: Where a unit test's settings point unless it says otherwise: refused at once, never a real server.
NO_SERVER_DSN = "postgresql://unit-tests@127.0.0.1:1/no_database_in_unit_tests"


@pytest.fixture(autouse=True)
def no_database(monkeypatch, tmp_path_factory):
    for name in list(os.environ):
        if name.startswith("MEMPALACE_PG_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MEMPALACE_PG_DSN", NO_SERVER_DSN)
    monkeypatch.setenv("MEMPALACE_CONFIG_DIR", str(tmp_path_factory.mktemp("mpconfig")))
    yield
