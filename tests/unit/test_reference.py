"""The reference pages say what the code does: docs/reference-cli.md and docs/reference-settings.md are
what scripts/reference.py renders from the parser and the settings table today, every variable the
package or its Docker image reads is in that table, and each setting refuses a bad value by its name."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mempalace_pg.config import SETTINGS, ConfigError, Setting, process_setting

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("reference", ROOT / "scripts" / "reference.py")
reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reference)

#: Variables read that are not settings: MemPalace's own, and the DSN a process hands its folder.
NOT_SETTINGS = {
    "MEMPALACE_BACKEND_EXPLICIT",
    "MEMPALACE_CONFIG_DIR",
    "MEMPALACE_MCP_READ_ONLY",
    "MEMPALACE_PG_FOLDER_DSN",
}


def test_the_reference_pages_are_what_the_code_renders():
    checked = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "reference.py"), "--check"], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_variable_read_is_in_the_settings_table():
    code = "".join(p.read_text("utf-8") for p in (ROOT / "mempalace_pg").rglob("*.py"))
    code += "".join(p.read_text("utf-8") for p in (ROOT / "docker").iterdir() if p.is_file())
    read = set(re.findall(r"\b((?:MEMPALACE|PGBOUNCER)_[A-Z_]*[A-Z])\b", code)) - NOT_SETTINGS
    listed = {s.env for s in SETTINGS} | {f"{s.env}_FILE" for s in SETTINGS if "_FILE" in s.about}
    assert read - listed == set()


def test_every_cli_command_and_flag_is_on_the_page():
    page = reference.CLI_PAGE.read_text("utf-8")
    for flag in ("--dsn", "--namespace", "--mode", "--boost", "--text-weight", "--batch", "--progress"):
        assert f"`{flag}`" in page, flag


@pytest.mark.parametrize(
    "name, value, match",
    [
        ("backlog_rows", "lots", "MEMPALACE_PG_BACKLOG_ROWS must be a whole number, 0 or more, not 'lots'"),
        ("backlog_rows", "-5", "MEMPALACE_PG_BACKLOG_ROWS must be a whole number, 0 or more, not -5"),
        ("build_workers", "two", "MEMPALACE_PG_BUILD_WORKERS must be a whole number from 0 to 64"),
        ("build_memory", "1 gig", "MEMPALACE_PG_BUILD_MEMORY must be a PostgreSQL size"),
        ("build_memory", "512kB", "MEMPALACE_PG_BUILD_MEMORY must be a PostgreSQL size"),
        ("folder", "maybe", "MEMPALACE_PG_FOLDER must be `on` or `off`"),
        ("mcp_tools", "perhaps", "MEMPALACE_PG_MCP_TOOLS must be true or false"),
    ],
)
def test_a_bad_process_setting_is_refused_by_name(monkeypatch, name, value, match):
    env = next(s.env for s in SETTINGS if s.name == name)
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError, match=re.escape(match)):
        process_setting(name)


@pytest.mark.parametrize(
    "name, value, expected",
    [("build_memory", "256MB", "256MB"), ("build_memory", "2048kB", "2048kB"), ("backlog_rows", "0", 0)],
)
def test_a_good_process_setting_is_taken(monkeypatch, name, value, expected):
    env = next(s.env for s in SETTINGS if s.name == name)
    monkeypatch.setenv(env, value)
    assert process_setting(name) == expected


def test_every_default_is_a_value_its_setting_takes():
    for s in SETTINGS:
        if s.default not in ("", None):
            assert s.parse(s.default, "default") == s.default, s.name
    assert all(
        isinstance(s, Setting) and s.scope in {"plugin", "process", "command", "image"} for s in SETTINGS
    )
