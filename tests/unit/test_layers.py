"""The package's layers, as CONTRIBUTING.md's table (docs/architecture.md) draws them, kept by a check.

Each module of ``mempalace_pg`` is on one floor and imports only from its own floor or those below it,
at module level or inside a function alike: the vector-index engine (``engine/``) sits below ``store/`` and
never imports it; ``graph/`` never imports ``store/``. No module takes
another module's private name (``from x import _y``) or reaches into another object's private
attribute (``obj._y`` where ``obj`` is not ``self`` or ``cls``). The few reach-ins into MemPalace's
own private names are deliberate and listed in :data:`ALLOWED_PRIVATE`, each with the module using it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mempalace_pg"

#: floor number by module path prefix (relative to the package, without ".py"); the longest match wins
FLOORS = {
    "config": 0,
    "errors": 0,
    "text": 0,
    "marker": 0,
    "patching": 0,
    "lazy_chromadb": 0,
    "backend_base": 0,
    "db": 1,
    "engine": 2,
    "store": 3,
    "graph": 3,
    "tools": 4,
    "atomic": 4,
    "mining": 4,
    "retrieval": 4,
    "mcp_tools": 4,
    "hooks": 4,
    "cli": 4,
    "registries": 4,
}

#: Private attributes read on an object other than ``self``, on purpose, by the module that reads them:
#: MemPalace's own (hooks.py's table says why for each; they are the names to re-check on a MemPalace
#: upgrade), and a class's own attributes on a copy or a new instance it makes of itself. A new one is
#: a decision to write down here, not an accident.
ALLOWED_PRIVATE = {
    "hooks": {
        "_config",
        "_selected_backend_name",
        "_sqlite_wing_room_counts",
        "_MULTI_PROCESS_WRITER_BACKENDS",
        "_read_kg",
        "_wing_source_counts_reader",
        "_graph_stats_from_grouped_rows",
        "_MAX_RESULTS",
        "_sanitize_optional_name",
        "_get_collection",
        "_fill_drawer_previews",
        "_collection_error_or_no_palace",
        "_collapse_drawer_rows",
        "_chroma_field",
    },
    "mcp_tools.in_mempalace": {"_READ_ONLY_REFUSED_TOOLS"},
    "graph.routing": {"_SQLITE_KNOWLEDGE_GRAPH"},
    # bound_to()'s copy of itself; MemPalace's LIKE escaping
    "graph.kg": {"_connection", "_lock", "_escape_like", "_bound"},
    # MemPalace's SQLite graph, built in memory for kg._conn()
    "graph.replication": {"_connection", "_lock", "_init_db"},
    # Database.get, a classmethod, fills in the instance it makes; HotFirstPool overrides psycopg_pool's
    # hook that picks the idle connection to hand out
    "db.pool": {"_pool", "_get_ready_connection"},
}


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        out.append((".".join(parts), path))
    return out


def floor_of(module: str) -> int | None:
    """None for the package's front door (``mempalace_pg/__init__.py``), which installs the patches."""
    if not module:
        return None
    head = module.split(".")[0]
    if head not in FLOORS:
        raise AssertionError(f"mempalace_pg.{module} is on no floor: add it to FLOORS and CONTRIBUTING")
    return FLOORS[head]


def imported_modules(tree: ast.AST) -> list[tuple[int, str, list[str]]]:
    """(line, module under mempalace_pg, names taken) for every import of the package in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "mempalace_pg" or node.module.startswith("mempalace_pg."):
                target = node.module[len("mempalace_pg") :].lstrip(".")
                names = [a.name for a in node.names]
                if target == "":  # from mempalace_pg import store: the submodule; __version__: the front door
                    for name in names:
                        is_module = (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()
                        found.append((node.lineno, name if is_module else "", []))
                else:
                    found.append((node.lineno, target, names))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("mempalace_pg."):
                    found.append((node.lineno, alias.name[len("mempalace_pg.") :], []))
    return found


def test_every_import_of_the_package_runs_down_or_across_never_up():
    upward = []
    for module, path in modules():
        mine = floor_of(module)
        if mine is None:
            continue
        for line, target, _names in imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
            theirs = floor_of(target)
            if theirs is not None and theirs > mine:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports mempalace_pg.{target}")
            if module.startswith("graph") and target.startswith("store"):
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line}: graph/ imports store/")
    assert upward == []


def test_no_module_takes_another_modules_private_name():
    taken = []
    for _module, path in modules():
        for line, target, names in imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
            for name in names:
                if name.startswith("_") and not name.startswith("__"):
                    taken.append(f"{path.relative_to(PACKAGE.parent)}:{line} takes {target}.{name}")
    assert taken == []


def _private_attribute(node: ast.Attribute) -> bool:
    return node.attr.startswith("_") and not node.attr.startswith("__")


def test_no_object_reaches_into_another_objects_private_attributes():
    """``self._x`` and ``cls._x`` are an object's own; ``self._x._y`` or ``other._y`` reach into another's."""
    reached = []
    for module, path in modules():
        allowed = ALLOWED_PRIVATE.get(module, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute) or not _private_attribute(node):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if node.attr in allowed:
                continue
            reached.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} .{node.attr}")
    assert reached == []


def test_every_module_on_a_floor_is_in_the_table():
    for module, _path in modules():
        floor_of(module)


def _module_level_imports(tree: ast.Module) -> list[str]:
    """The package's modules imported when ``tree``'s module is imported: its top-level imports, not those
    inside functions (made on first use) nor under ``if TYPE_CHECKING`` (never made)."""
    found = []

    def visit(nodes):
        for node in nodes:
            if isinstance(node, ast.If):
                if "TYPE_CHECKING" in ast.unparse(node.test):
                    visit(node.orelse)
                    continue
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for _, target, names in imported_modules(node):
                    package = PACKAGE.joinpath(*target.split(".")) if target else None
                    submodules = [
                        f"{target}.{name}"
                        for name in names
                        if package and ((package / name).is_dir() or (package / f"{name}.py").is_file())
                    ]
                    found.extend(submodules or ([target] if target else []))

    visit(tree.body)
    return found


def test_no_module_imports_itself_back_through_others():
    """No circle of imports made at import time: a reader can follow the arrows down."""
    graph = {}
    for module, path in modules():
        if not module:
            continue
        targets = set()
        for target in _module_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
            # `from mempalace_pg.engine import indexing` names the module; `...engine.indexing import x` too
            targets.add(target)
        graph[module] = targets
    circles = []

    def walk(node, trail):
        for nxt in graph.get(node, ()):
            if nxt in trail:
                circles.append(" -> ".join(trail[trail.index(nxt) :] + [nxt]))
            elif len(trail) < 20:
                walk(nxt, trail + [nxt])

    for start in graph:
        walk(start, [start])
    assert sorted(set(circles)) == []
