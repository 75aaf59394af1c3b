"""docs/troubleshooting.md covers what the code can say: every error class the plugin raises and every
check `mempalace-pg doctor` reports, by name, and every known defect doctor names."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")


def _error_classes() -> set[str]:
    """Every exception class defined in the package."""
    found = set()
    for path in (ROOT / "mempalace_pg").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                re.search(r"(Error|Exception)$", ast.unparse(b)) for b in node.bases
            ):
                found.add(node.name)
    return found


def _doctor_checks() -> set[str]:
    """The names doctor reports checks under, where the code spells them out."""
    names = set()
    for path in (ROOT / "mempalace_pg" / "tools" / "doctor").glob("*.py"):
        names |= set(re.findall(r'report\.add\(\s*"([^"]+)"', path.read_text("utf-8")))
    return names | {"vector", "age"}


def test_every_error_the_plugin_raises_is_explained():
    errors = _error_classes()
    assert {"DatabaseUnavailableError", "ConfigError", "InvalidRecordError"} <= errors
    # a private class (a rollback signal inside one module) never reaches a user
    assert sorted(e for e in errors if f"`{e}`" not in PAGE and not e.startswith("_")) == []


def test_every_doctor_check_is_explained():
    checks = _doctor_checks()
    assert {"connect", "schema", "memory", "palace"} <= checks
    assert sorted(c for c in checks if f"`{c}`" not in PAGE) == []


def test_every_known_defect_is_named():
    from mempalace_pg.db.defects import DEFECTS

    missing = [d.key for d in DEFECTS if f"{d.extension}: {d.key}" not in PAGE]
    assert missing == []
