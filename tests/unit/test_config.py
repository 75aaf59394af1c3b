"""Settings (mempalace_pg.config): where each one comes from, how bad values are named, and DSNs shown
without their password."""

from __future__ import annotations

import json

import pytest

from mempalace_pg.config import (
    DEFAULT_DSN,
    DEFAULT_SCHEMA,
    ConfigError,
    Settings,
    dsn_target,
    redact_dsn,
    validate_identifier,
)


@pytest.fixture
def config_json(monkeypatch, tmp_path):
    """write(**keys): MemPalace's config.json in a directory of its own, holding ``keys``."""
    monkeypatch.setenv("MEMPALACE_CONFIG_DIR", str(tmp_path))

    def write(**keys):
        (tmp_path / "config.json").write_text(json.dumps(keys))

    return write


# -- redact_dsn ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dsn, shown",
    [
        ("postgresql://u:pw@h:5/d", "postgresql://u:***@h:5/d"),
        ("postgresql://u@h/d?password=pw&sslmode=require", "postgresql://u@h/d?password=***&sslmode=require"),
        ("host=h user=u password=pw dbname=d", "host=h user=u password=*** dbname=d"),
        ("host=h password='p w' dbname=d", "host=h password=*** dbname=d"),
    ],
)
def test_redact_dsn(dsn, shown):
    assert redact_dsn(dsn) == shown


@pytest.mark.parametrize(
    "dsn, shown",
    [
        ("", ""),
        ("postgresql://u@h:5/d", "postgresql://u@h:5/d"),  # nothing to hide
        ("postgresql://h/d", "postgresql://h/d"),
        ("postgresql://u:p%40ss:word@h/d", "postgresql://u:***@h/d"),  # a colon in the password
        ("postgresql://u:pw@h/d?PASSWORD=x", "postgresql://u:***@h/d?PASSWORD=***"),
        ("host=h PASSWORD = pw dbname=d", "host=h PASSWORD = *** dbname=d"),
        ("host=h password='it\\'s' dbname=d", "host=h password=*** dbname=d"),
        ("postgresql://u:pw@[::1/d", "<unparseable DSN>"),  # never the raw text, which holds the password
    ],
)
def test_redact_dsn_other_forms(dsn, shown):
    assert redact_dsn(dsn) == shown


# -- validate_identifier ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "mempalace", "t_123_abc", "x" * 48])
def test_plain_identifiers_are_accepted(name):
    assert validate_identifier(name, "schema") == name


@pytest.mark.parametrize(
    "name", ["", "1abc", "_a", "Abc", "a-b", "a b", "x" * 49, 'x"; DROP SCHEMA public; --', "é", None, 5]
)
def test_anything_else_is_refused_by_name(name):
    with pytest.raises(ConfigError, match="the schema .* is not a valid name: use 1-48 characters"):
        validate_identifier(name, "the schema")


def test_derived_names_may_be_as_long_as_postgresql_allows():
    assert validate_identifier("x" * 63, "an index name", longest=63) == "x" * 63
    with pytest.raises(ConfigError, match="use 1-63 characters"):
        validate_identifier("x" * 64, "an index name", longest=63)
    with pytest.raises(ConfigError, match="use 1-20 characters"):
        validate_identifier("x" * 21, "a role", longest=20)


# -- dsn_target ------------------------------------------------------------------------------------


def test_dsn_target_names_host_port_database_never_the_user_or_password():
    assert dsn_target("postgresql://u:pw@db.example:6543/palace") == {
        "host": "db.example",
        "port": 6543,
        "dbname": "palace",
    }
    assert dsn_target("host=/run/postgresql user=me password=pw") == {
        "host": "/run/postgresql",
        "port": 5432,
        "dbname": "me",
    }  # libpq's default database: the user's
    assert dsn_target("") == {"host": "localhost", "port": 5432, "dbname": ""}


@pytest.mark.parametrize(
    "dsn", ["postgresql://u:pw@h:notaport/d", "host=h password=pw port=x", "nonsense here"]
)
def test_dsn_target_refuses_a_malformed_dsn_without_its_password(dsn):
    with pytest.raises(ConfigError, match="cannot be parsed") as info:
        dsn_target(dsn)
    assert "pw" not in str(info.value).replace("password", "")


# -- Settings.load: where each setting comes from --------------------------------------------------


@pytest.mark.parametrize(
    "env, value, match",
    [
        ("MEMPALACE_PG_SCHEMA", "Bad-Schema", "not a valid name"),
        ("MEMPALACE_PG_SCHEMA", 'x"; DROP SCHEMA public; --', "not a valid name"),
        ("MEMPALACE_PG_POOL_MAX_SIZE", "many", "whole number"),
        ("MEMPALACE_PG_EF_SEARCH", "5000", "MEMPALACE_PG_EF_SEARCH must be a whole number from 1 to 1000"),
        ("MEMPALACE_PG_AUTO_UPGRADE", "perhaps", "true or false"),
        ("MEMPALACE_PG_DSN", "postgresql://u:pw@h:notaport/d", "cannot be parsed"),
    ],
)
def test_bad_settings_are_named(monkeypatch, env, value, match):
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError, match=match) as info:
        Settings.load()
    assert "pw" not in str(info.value).replace("password", "")


def test_settings_from_config_json(monkeypatch, tmp_path):
    monkeypatch.delenv("MEMPALACE_PG_SCHEMA", raising=False)  # tests/unit/conftest.py clears it already
    monkeypatch.setenv("MEMPALACE_CONFIG_DIR", str(tmp_path))
    (tmp_path / "config.json").write_text(
        json.dumps({"postgres_schema": "from_file", "postgres_pool_max_size": 3})
    )
    s = Settings.load()
    assert s.schema == "from_file" and s.pool_max_size == 3
    monkeypatch.setenv("MEMPALACE_PG_SCHEMA", "from_env")
    assert Settings.load().schema == "from_env"  # the environment wins


def test_defaults_when_nothing_is_set(monkeypatch):
    monkeypatch.delenv("MEMPALACE_PG_DSN")
    s = Settings.load()
    assert s == Settings()
    assert (s.dsn, s.schema, s.namespace) == (DEFAULT_DSN, DEFAULT_SCHEMA, "")
    assert (s.pool_min_size, s.pool_max_size, s.ef_search, s.auto_upgrade) == (1, 8, 150, True)
    assert s.graph == "mempalace_kg"


def test_options_then_environment_then_config_json_then_default(monkeypatch, config_json):
    config_json(postgres_schema="from_file", postgres_ef_search=70, postgres_pool_max_size=5)
    monkeypatch.setenv("MEMPALACE_PG_SCHEMA", "from_env")
    monkeypatch.setenv("MEMPALACE_PG_EF_SEARCH", "80")
    s = Settings.load({"schema": "from_options", "pool_max_size": None})  # None: not given
    assert s.schema == "from_options"
    assert s.ef_search == 80  # environment over config.json
    assert s.pool_max_size == 5  # config.json over the default
    assert s.statement_timeout_ms == 60_000  # the default
    assert s.graph == "from_options_kg"


def test_blank_environment_values_and_config_keys_count_as_unset(monkeypatch, config_json):
    config_json(postgres_schema="from_file", postgres_namespace="")
    monkeypatch.setenv("MEMPALACE_PG_SCHEMA", "   ")
    monkeypatch.setenv("MEMPALACE_PG_NAMESPACE", "")
    s = Settings.load()
    assert s.schema == "from_file" and s.namespace == ""


@pytest.mark.parametrize("content", ["[1, 2]", "{not json", ""])
def test_a_config_json_that_is_not_an_object_is_ignored(monkeypatch, tmp_path, content):
    monkeypatch.setenv("MEMPALACE_CONFIG_DIR", str(tmp_path))
    (tmp_path / "config.json").write_text(content)
    assert Settings.load().schema == DEFAULT_SCHEMA


def test_bad_config_json_value_names_the_key(config_json):
    config_json(postgres_pool_min_size="lots")
    with pytest.raises(
        ConfigError, match="config.json key 'postgres_pool_min_size' \\(MEMPALACE_PG_POOL_MIN_SIZE\\) must be"
    ):
        Settings.load()


@pytest.mark.parametrize(
    "raw, value",
    [
        ("1", True),
        ("yes", True),
        (" ON ", True),
        ("true", True),
        ("0", False),
        ("no", False),
        ("Off", False),
        ("FALSE", False),
    ],
)
def test_boolean_spellings(monkeypatch, raw, value):
    monkeypatch.setenv("MEMPALACE_PG_AUTO_UPGRADE", raw)
    assert Settings.load().auto_upgrade is value


def test_config_json_booleans_and_numbers_as_json_types(config_json):
    config_json(postgres_auto_upgrade=False, postgres_connect_timeout_s=3)
    s = Settings.load()
    assert s.auto_upgrade is False and s.connect_timeout_s == 3


@pytest.mark.parametrize(
    "env, value, match",
    [
        ("MEMPALACE_PG_POOL_MIN_SIZE", "-1", "from 0 to 1000, not -1"),
        ("MEMPALACE_PG_POOL_MIN_SIZE", "9", "pool sizes must satisfy"),  # above the default max of 8
        ("MEMPALACE_PG_POOL_MAX_SIZE", "0", "MEMPALACE_PG_POOL_MAX_SIZE must be a whole number from 1"),
        ("MEMPALACE_PG_EF_SEARCH", "0", "from 1 to 1000, not 0"),
        ("MEMPALACE_PG_NAMESPACE", "has space", "namespace 'has space' must be 1-64 characters"),
        ("MEMPALACE_PG_NAMESPACE", "n" * 65, "must be 1-64 characters"),
    ],
)
def test_values_out_of_range_are_refused(monkeypatch, env, value, match):
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError, match=match):
        Settings.load()


def test_settings_show_the_dsn_redacted(monkeypatch):
    monkeypatch.setenv("MEMPALACE_PG_DSN", "postgresql://me:s3cret@h/d")
    s = Settings.load()
    assert s.dsn == "postgresql://me:s3cret@h/d" and s.redacted_dsn == "postgresql://me:***@h/d"


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_an_identifier_with_a_trailing_newline_is_refused():
    """The rule matches the whole name: ``re.match(...$)`` would let "abc\\n" through."""
    import pytest

    from mempalace_pg.config import ConfigError, validate_identifier
    from mempalace_pg.db.schema import render_sql

    with pytest.raises(ConfigError):
        validate_identifier("abc\n", "schema")
    with pytest.raises(ConfigError):
        render_sql(':"schema"', {"schema": "abc\n"})
    assert validate_identifier("ab", "schema") == "ab"  # the old 3-63 copy refused two letters
