"""Connecting (mempalace_pg.db.connect): a server that cannot be reached is named, its password never is,
whichever way in (the backend, the knowledge graph, the CLI) met it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from mempalace.backends import PalaceRef

from mempalace_pg.config import Settings
from mempalace_pg.db.connect import connect, describe_connect_error, scrub_password
from mempalace_pg.errors import DatabaseUnavailableError
from mempalace_pg.graph.kg import AgeKnowledgeGraph
from mempalace_pg.store.backend import PostgresBackend


def test_unreachable_server_names_target_never_password(tmp_path, monkeypatch):
    dsn = "postgresql://someone:s3cret-pw@127.0.0.1:1/nowhere"
    monkeypatch.setenv("MEMPALACE_PG_DSN", dsn)
    monkeypatch.setenv("MEMPALACE_PG_CONNECT_TIMEOUT_S", "2")
    backend = PostgresBackend()
    ref = PalaceRef(id=str(tmp_path / "p"), local_path=str(tmp_path / "p"))
    with pytest.raises(DatabaseUnavailableError) as info:
        backend.get_collection(palace=ref, collection_name="mempalace_drawers", create=True)
    message = str(info.value)
    assert "127.0.0.1:1/nowhere" in message and "MEMPALACE_PG_DSN" in message
    assert "s3cret-pw" not in message and "***" in message
    assert not (tmp_path / "p" / "mempalace_pg.json").exists()  # nothing half-created


def test_unreachable_server_says_so_without_the_password(monkeypatch):
    settings = Settings.load(
        {"dsn": "postgresql://someone:s3cret-pw@127.0.0.1:9/nowhere", "connect_timeout_s": 2}
    )
    kg = AgeKnowledgeGraph(palace_key="unreachable", settings=settings)
    with pytest.raises(DatabaseUnavailableError) as err:
        kg.add_triple("A", "p", "B")
    assert "127.0.0.1:9/nowhere" in str(err.value) and "s3cret-pw" not in str(err.value)


def test_cli_unreachable_server_exit_code_and_no_password(tmp_path):
    env = dict(
        os.environ,
        MEMPALACE_PG_DSN="postgresql://u:hunter2-secret@127.0.0.1:1/db",
        MEMPALACE_PG_CONNECT_TIMEOUT_S="2",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mempalace_pg.cli", "db", "current"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "cannot connect to PostgreSQL at 127.0.0.1:1/db" in out
    assert "hunter2-secret" not in out
    assert "Traceback" not in out


def test_connect_raises_database_unavailable():
    settings = Settings.load({"dsn": "postgresql://u:pw-xyz@127.0.0.1:1/d", "connect_timeout_s": 2})
    with pytest.raises(
        DatabaseUnavailableError, match="cannot connect to PostgreSQL at 127.0.0.1:1/d"
    ) as info:
        connect(settings)
    assert "pw-xyz" not in str(info.value)


def test_a_driver_message_echoing_the_password_is_scrubbed():
    settings = Settings.load({"dsn": "host=db port=6000 dbname=p user=u password=hunter2"})
    error = describe_connect_error(settings, OSError("auth failed for password hunter2"))
    assert isinstance(error, DatabaseUnavailableError)
    message = str(error)
    assert message.startswith(
        "cannot connect to PostgreSQL at db:6000/p (DSN host=db port=6000 dbname=p user=u "
        "password=***): auth failed for password ***."
    )
    assert "hunter2" not in message and "postgres_dsn" in message


def test_an_empty_driver_message_is_named_by_its_type():
    settings = Settings.load({"dsn": "postgresql://h/d"})
    assert "at h:5432/d (DSN postgresql://h/d): TimeoutError." in str(
        describe_connect_error(settings, TimeoutError())
    )


@pytest.mark.parametrize(
    "message, dsn, scrubbed",
    [
        ("bad pw s3cret here", "postgresql://u:s3cret@h/d", "bad pw *** here"),
        ("bad pw s3cret here", "host=h password=s3cret", "bad pw *** here"),
        ("nothing to hide", "postgresql://u@h/d", "nothing to hide"),
        ("an unparseable DSN", "host='unterminated", "an unparseable DSN"),
    ],
)
def test_scrub_password(message, dsn, scrubbed):
    assert scrub_password(message, dsn) == scrubbed
