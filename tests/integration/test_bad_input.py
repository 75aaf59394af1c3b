"""Bad input gets a clear error and loses nothing (DEVELOPERS.md, ground rule 3)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import psycopg
import pytest
from mempalace.backends import DimensionMismatchError, PalaceRef

from mempalace_pg.store.backend import PostgresBackend
from mempalace_pg.config import ConfigError, Settings, redact_dsn
from mempalace_pg.errors import DatabaseUnavailableError, ExtensionMissingError, InvalidRecordError


def _one(col, **overrides):
    kwargs = dict(ids=["ok", "bad"], documents=["fine", "fine too"], metadatas=[{}, {}],
                  embeddings=[[1.0, 0.0], [0.0, 1.0]])
    kwargs.update(overrides)
    return kwargs


@pytest.mark.parametrize("overrides, match", [
    ({"embeddings": [[1.0, 0.0], [math.nan, 1.0]]}, "NaN or infinity"),
    ({"embeddings": [[1.0, 0.0], [math.inf, 1.0]]}, "NaN or infinity"),
    ({"metadatas": [{}, {"score": math.nan}]}, "record 'bad': metadata.score is nan"),
    ({"metadatas": [{}, {"when": object()}]}, "record 'bad': metadata.when is of type object, which has no JSON form"),
    ({"metadatas": [{}, {("tuple", "key"): 1}]}, "record 'bad': metadata key"),
    ({"metadatas": [{}, "not a dict"]}, "record 'bad': metadata is of type str; pass a dict"),
    ({"documents": ["fine", None]}, "record 'bad': document is None, not text"),
    ({"ids": ["ok", 7]}, "record 7: id is of type int, not a string"),
    ({"ids": ["same", "same"]}, "unique"),
    ({"ids": ["ok", "ok\x00"]}, "are the same id 'ok' once NUL characters are removed"),
    ({"documents": ["only one"]}, "does not match"),
    ({"embeddings": None}, "explicit embeddings"),
    ({"embeddings": [[], []]}, "non-empty"),
])
def test_bad_batches_write_nothing(make_collection, overrides, match):
    col = make_collection()
    col.add(ids=["existing"], documents=["kept"], metadatas=[{"wing": "w"}], embeddings=[[1.0, 1.0]])
    for method in (col.add, col.upsert):
        with pytest.raises(ValueError, match=match):
            method(**_one(col, **overrides))
    assert col.get().ids == ["existing"]
    assert col.get(ids=["existing"]).documents == ["kept"]


def test_invalid_record_error_is_a_value_error():
    assert issubclass(InvalidRecordError, ValueError)


def test_wrong_dimension_in_one_batch_and_across_batches(make_collection):
    col = make_collection()
    with pytest.raises(DimensionMismatchError, match="different widths"):
        col.add(ids=["a", "b"], documents=["a", "b"], metadatas=[{}, {}], embeddings=[[1.0, 0.0], [1.0, 0.0, 0.0]])
    col.add(ids=["a"], documents=["a"], metadatas=[{}], embeddings=[[1.0, 0.0]])
    with pytest.raises(DimensionMismatchError, match="2-dimension"):
        col.upsert(ids=["a", "c"], documents=["a", "c"], metadatas=[{}, {}], embeddings=[[1.0, 0.0, 0.0]] * 2)
    with pytest.raises(DimensionMismatchError):
        col.update(ids=["a"], embeddings=[[1.0, 0.0, 0.0]])
    assert col.get(ids=["a"], include=["embeddings"]).embeddings == [[1.0, 0.0]]


def test_nan_query_vector(make_collection):
    col = make_collection()
    col.add(ids=["a"], documents=["a"], metadatas=[{}], embeddings=[[1.0, 0.0]])
    with pytest.raises(ValueError, match="NaN"):
        col.query(query_embeddings=[[math.nan, 0.0]])


@pytest.mark.parametrize("count", ["10", "10; DROP TABLE records", True, -1, 10.0, 2**31])
def test_row_counts_in_statement_text_are_plain_ints_only(count):
    """Row counts are the one thing written into statement text; anything but an int in range is refused."""
    from mempalace_pg.db.sqlkit import row_count

    with pytest.raises(ValueError, match="row count"):
        row_count(count)


def test_query_row_counts_any_size(make_collection):
    col = make_collection()
    col.add(ids=["a", "b"], documents=["a", "b"], metadatas=[{"wing": "w"}] * 2, embeddings=[[1.0, 0.0], [0.0, 1.0]])
    for n in (1, 2, 10**12):  # larger than the statement may spell: capped, every record returned
        got = col.query(query_embeddings=[[1.0, 0.1]], n_results=n, where={"wing": "w"})
        assert got.ids == [["a", "b"][:n]]


def test_quotes_and_sql_metacharacters_are_stored_verbatim(make_collection):
    col = make_collection()
    nasty = "Robert'); DROP TABLE records;-- $1 %s %(x)s \\ \" ' $$ {}"
    col.add(ids=[nasty], documents=[nasty], metadatas=[{nasty: nasty, "wing": nasty}], embeddings=[[1.0, 0.0]])
    got = col.get(ids=[nasty], include=["documents", "metadatas"])
    assert got.ids == [nasty] and got.documents == [nasty] and got.metadatas == [{nasty: nasty, "wing": nasty}]
    assert col.get(where={nasty: nasty}, include=[]).ids == [nasty]
    assert [h.id for h in col.lexical_search(query=nasty, n_results=3).hits] == [nasty]


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


def test_cli_unreachable_server_exit_code_and_no_password(tmp_path):
    env = dict(os.environ, MEMPALACE_PG_DSN="postgresql://u:hunter2-secret@127.0.0.1:1/db",
               MEMPALACE_PG_CONNECT_TIMEOUT_S="2")
    proc = subprocess.run([sys.executable, "-m", "mempalace_pg.cli", "db", "current"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "cannot connect to PostgreSQL at 127.0.0.1:1/db" in out
    assert "hunter2-secret" not in out
    assert "Traceback" not in out


@pytest.mark.parametrize("dsn, shown", [
    ("postgresql://u:pw@h:5/d", "postgresql://u:***@h:5/d"),
    ("postgresql://u@h/d?password=pw&sslmode=require", "postgresql://u@h/d?password=***&sslmode=require"),
    ("host=h user=u password=pw dbname=d", "host=h user=u password=*** dbname=d"),
    ("host=h password='p w' dbname=d", "host=h password=*** dbname=d"),
])
def test_redact_dsn(dsn, shown):
    assert redact_dsn(dsn) == shown


@pytest.mark.parametrize("env, value, match", [
    ("MEMPALACE_PG_SCHEMA", "Bad-Schema", "not a valid name"),
    ("MEMPALACE_PG_SCHEMA", 'x"; DROP SCHEMA public; --', "not a valid name"),
    ("MEMPALACE_PG_POOL_MAX_SIZE", "many", "whole number"),
    ("MEMPALACE_PG_EF_SEARCH", "5000", "between 1 and 1000"),
    ("MEMPALACE_PG_AUTO_UPGRADE", "perhaps", "true or false"),
    ("MEMPALACE_PG_DSN", "postgresql://u:pw@h:notaport/d", "cannot be parsed"),
])
def test_bad_settings_are_named(monkeypatch, env, value, match):
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError, match=match) as info:
        Settings.load()
    assert "pw" not in str(info.value).replace("password", "")


def test_settings_from_config_json(monkeypatch, tmp_path):
    import json

    monkeypatch.delenv("MEMPALACE_PG_SCHEMA")
    monkeypatch.setenv("MEMPALACE_CONFIG_DIR", str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"postgres_schema": "from_file", "postgres_pool_max_size": 3}))
    s = Settings.load()
    assert s.schema == "from_file" and s.pool_max_size == 3
    monkeypatch.setenv("MEMPALACE_PG_SCHEMA", "from_env")
    assert Settings.load().schema == "from_env"  # the environment wins


def test_missing_extension_names_the_package(pg_dsn):
    from mempalace_pg.db.schema import require_extension

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        major = conn.info.server_version // 10000
        with pytest.raises(ExtensionMissingError) as info:
            require_extension(conn, "no_such_ext_xyz", "postgresql-{major}-no-such-ext", "https://example.invalid")
    assert f"postgresql-{major}-no-such-ext" in str(info.value)


def test_version_parsing_and_current_server_accepted(pg_dsn):
    from mempalace_pg.db.schema import version_tuple, check_server

    assert version_tuple("0.8.0") == (0, 8, 0) and version_tuple("0.7.4") < (0, 8, 0)
    assert version_tuple("1.8.0~rc0") == (1, 8, 0)
    with psycopg.connect(pg_dsn) as conn:
        check_server(conn)  # the test servers (PG 17/18, pgvector 0.8.x) are new enough
