"""The schema runner's pure parts (mempalace_pg.db.schema): psql variables in sql/ files, version strings,
and the head revision the code expects."""

from __future__ import annotations

import re

import pytest

from mempalace_pg.config import ConfigError
from mempalace_pg.db.schema import (
    HEAD_REVISION,
    head_revision,
    migrations_dir,
    render_sql,
    sql_dir,
    version_tuple,
)


def test_render_sql_fills_identifiers_and_literals():
    text = "CREATE TABLE :\"schema\".t (g text DEFAULT :'graph'); SELECT :\"graph\", :'schema';"
    assert render_sql(text, {"schema": "mempalace", "graph": "mempalace_kg"}) == (
        "CREATE TABLE \"mempalace\".t (g text DEFAULT 'mempalace_kg'); SELECT \"mempalace_kg\", 'mempalace';"
    )


def test_render_sql_leaves_other_text_alone():
    text = "SELECT ':not_a_variable', :other, '::jsonb', x::text FROM :\"schemas\";"
    assert render_sql(text, {"schema": "abc"}) == text
    assert render_sql("no variables", {}) == "no variables"


@pytest.mark.parametrize(
    "value", ["Bad", "1abc", 'x"; DROP SCHEMA public; --', "a'b", "", "a" * 64, "abc def", None]
)
def test_render_sql_refuses_anything_but_a_plain_identifier(value):
    with pytest.raises(
        ConfigError, match="the SQL variable schema .* is not a valid name: use 1-63 characters"
    ):
        render_sql(':"schema"', {"schema": value})


def test_render_sql_takes_names_up_to_postgresqls_limit():
    assert render_sql(':"graph"', {"graph": "g" * 63}) == '"' + "g" * 63 + '"'


def test_every_sql_file_renders_completely_with_the_variables_migrations_pass():
    files = sorted(sql_dir().glob("*.sql"))
    assert [f.name for f in files][:1] == ["0001_drawers.sql"] and len(files) >= 7
    for path in files:
        text = render_sql(path.read_text(encoding="utf-8"), {"schema": "t_schema", "graph": "t_schema_kg"})
        assert not re.search(r":[\"'][a-z_]+[\"']", text), path.name


def test_version_parsing():
    assert version_tuple("0.8.0") == (0, 8, 0) and version_tuple("0.7.4") < (0, 8, 0)
    assert version_tuple("1.8.0~rc0") == (1, 8, 0)


def test_head_revision_constant_matches_migrations():
    assert HEAD_REVISION == head_revision()


def test_one_migration_per_sql_file_of_the_same_name():
    """CONTRIBUTING.md's convention: sql/NNNN_name.sql is applied by migrations/versions/NNNN_name.py."""
    revisions = sorted((migrations_dir() / "versions").glob("0*.py"))
    assert revisions[-1].stem == HEAD_REVISION
    assert [p.stem for p in revisions] == sorted(p.stem for p in sql_dir().glob("0*.sql"))
    for path in revisions:
        assert f'"{path.stem}.sql"' in path.read_text(encoding="utf-8"), path.name


def test_alembic_revision_writes_a_revision_that_imports_and_applies_its_own_sql_file(tmp_path):
    """A contributor's `alembic revision` (on a copy of the package's migrations) makes a file that
    imports, follows the head, and applies the sql/ file of its own name."""
    import importlib.util
    import shutil

    from alembic import command
    from alembic.config import Config

    from mempalace_pg.db import schema

    scripts = tmp_path / "migrations"
    shutil.copytree(schema.migrations_dir(), scripts, ignore=shutil.ignore_patterns("__pycache__"))
    cfg = Config(str(schema.migrations_dir().parent / "alembic.ini"))  # the repository's, as a contributor
    cfg.set_main_option("script_location", str(scripts))
    command.revision(cfg, message="a new table", rev_id="0099_a_new_table")

    written = scripts / "versions" / "0099_a_new_table.py"
    spec = importlib.util.spec_from_file_location("revision_under_test", written)
    revision = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(revision)
    assert revision.revision == "0099_a_new_table"
    assert revision.down_revision == schema.HEAD_REVISION
    assert 'apply_sql_file("0099_a_new_table.sql")' in written.read_text(encoding="utf-8")
    assert revision.upgrade.__module__ == "revision_under_test"
