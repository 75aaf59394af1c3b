"""Every piece of module-level state the package keeps is listed in ``mempalace_pg/registries.py``.

State, as this check finds it: a module-level container the module changes (an item set or deleted, or
``add``/``append``/``update``/``pop``/``clear``/``setdefault``/``discard``/``remove`` called on it), a
``ContextVar`` or ``WeakKeyDictionary``, a name a function rebinds with ``global``, and a function kept
with ``lru_cache``/``cache``. Constant tables (a dict no code changes) are not state. The rest belongs
on an object (a ``Database``, a pool, a collection) whose lifetime it shares.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mempalace_pg"
MUTATORS = {"add", "append", "update", "pop", "popitem", "clear", "setdefault", "discard", "remove", "extend"}
ALWAYS_STATE = {"ContextVar", "WeakKeyDictionary", "WeakValueDictionary"}


def _called(value: ast.expr) -> str:
    if isinstance(value, ast.Call):
        func = value.func
        return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return ""


def _declared(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(containers, state) as the module's top level declares them: containers it may change, and what
    is state however it is used (a context variable, a weak registry, a cached function)."""
    containers, state = set(), set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any("cache" in ast.unparse(d) for d in node.decorator_list):
                state.add(node.name)
            continue
        targets, value = [], None
        if isinstance(node, ast.Assign):
            targets, value = [t.id for t in node.targets if isinstance(t, ast.Name)], node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets, value = [node.target.id], node.value
        if value is None:
            continue
        literal = isinstance(value, (ast.Dict, ast.Set, ast.List, ast.DictComp, ast.SetComp, ast.ListComp))
        if _called(value) in ALWAYS_STATE:
            state.update(targets)
        elif literal or _called(value) in {"dict", "set", "list", "defaultdict", "OrderedDict", "deque"}:
            containers.update(t for t in targets if t != "__all__")
    return containers, state


def _changed(node: ast.AST, containers: set[str]) -> set[str]:
    """The containers ``node`` changes (an item set or deleted, a mutating method called)."""
    if isinstance(node, (ast.Assign, ast.Delete)):
        targets = node.targets
    elif isinstance(node, ast.AugAssign):
        targets = [node.target]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
        owner = node.func.value
        return {owner.id} & containers if isinstance(owner, ast.Name) else set()
    else:
        return set()
    return {
        t.value.id for t in targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
    } & containers


def module_state(tree: ast.Module) -> set[str]:
    """The names of ``tree``'s module-level state (see the module's docstring)."""
    containers, state = _declared(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            state.update(node.names)
        state |= _changed(node, containers)
    return state


def test_every_piece_of_module_state_is_listed_in_registries():
    listed = ast.get_docstring(ast.parse((PACKAGE / "registries.py").read_text(encoding="utf-8"))) or ""
    unlisted = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for name in sorted(module_state(ast.parse(path.read_text(encoding="utf-8")))):
            if f"``{rel}``" not in listed or not (f"``{name}``" in listed or f"``{name}()``" in listed):
                unlisted.append(f"mempalace_pg/{rel}: {name}")
    assert unlisted == [], "module-level state not in registries.py's list (or belonging on an object)"


def test_the_check_finds_state_and_passes_constants():
    tree = ast.parse(
        "import functools\n"
        "from contextvars import ContextVar\n"
        "TABLE = {'a': 1}\n"
        "_SEEN = {}\n"
        "_HELD = ContextVar('x')\n"
        "_ONCE = None\n"
        "def f(k):\n"
        "    global _ONCE\n"
        "    _SEEN[k] = TABLE['a']\n"
        "    _ONCE = 1\n"
        "@functools.lru_cache\n"
        "def g():\n"
        "    return 1\n"
    )
    assert module_state(tree) == {"_SEEN", "_HELD", "_ONCE", "g"}
