"""Layers that depend one way, and no import cycle of any kind.

Every import in the package counts: module-level ones, lazy ones inside functions, the
``if TYPE_CHECKING:`` ones, and ``importlib.import_module`` with a name the code spells. A
module may import its own layer or any layer below it, never one above, not even for a type;
and no module reaches itself again through its imports (the graph's strongly connected
components are single modules). A type-only import is a dependency like any other: a module
that names a type of a module above it, or of one that imports it, is one that cannot be
understood, tested or moved without it.

What counts as an edge, as import-linter (grimp) counts it: ``from a.b import c`` is an
edge to ``a.b.c`` when that is a module, else to ``a.b``; ``import a.b`` to ``a.b``. The
parent packages Python runs on the way (``a`` before ``a.b``) are not edges: a package's
``__init__`` that imports its submodules would otherwise make every submodule that imports
a sibling a cycle.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import itertools
from pathlib import Path
from typing import Callable, Iterator

import pytest

REPO = Path(__file__).resolve().parent.parent
NAME = "openhands_memory"
# migrations/ ships as openhands_memory.migrations (pyproject's package-dir).
ROOTS = {NAME: REPO / NAME, f"{NAME}.migrations": REPO / "migrations"}

# Top to bottom. The first layer with a matching prefix (relative to the package, "" being
# the package's own __init__) decides a module's layer.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("the command line", ("cli",)),
    ("the web inspector", ("web",)),
    ("the front door (the package's lazy exports)", ("",)),
    # The chat history renders conversations and resolves condensers by their settings
    # (config), and the agent frameworks' adapters build on it.
    ("settings files, chat histories and the agent frameworks", ("config", "chat", "integrations")),
    ("strategies, models, import/export, inspection", (
        "condensers", "summarizers", "llm", "io", "inspection", "data",
    )),
    # ``conv.replay`` runs a replay; the replay knows conversations only as protocols
    # (replay/run.py), so that a conversation can hand itself in without a cycle.
    ("conversation and replay", ("conversation", "replay")),
    # What a conversation asks of a strategy: below both, so that neither imports the other.
    ("the strategy seam", ("strategy",)),
    ("view", ("view",)),
    # Alembic's scripts (nothing imports them: alembic loads them by path); what a revision
    # needs of the index is frozen in storage (tests/test_migrations_frozen.py).
    ("the schema's revisions", ("migrations",)),
    ("storage", ("storage",)),
    ("the database: its location, file, creation and migration", (
        "database", "location", "migrate", "migration_plan", "sqlite_file", "files",
    )),
    ("events and schema", ("events", "schema", "searchable", "ranges", "limits", "settings", "allocation")),
    ("errors", ("errors",)),
]
RANK = {name: len(LAYERS) - i for i, (name, _) in enumerate(LAYERS)}  # higher: further up

# Modules that import by a name they compute (the package's lazy exports, the CLI's lazy
# commands), and where those imports go: read from the module itself, so that the graph
# holds them like any other edge.
DYNAMIC: dict[str, Callable[[], set[str]]] = {
    NAME: lambda: {importlib.util.resolve_name(m, NAME) for m in importlib.import_module(NAME)._EXPORTS.values()},
    f"{NAME}.cli": lambda: {
        f"{NAME}.cli.{spec[0]}" for spec in importlib.import_module(f"{NAME}.cli").COMMANDS.values()
    },
}


# --- the checker ---------------------------------------------------------------------------


def modules(roots: dict[str, Path]) -> dict[str, Path]:
    """Every module under ``roots`` (package name -> its folder), by dotted name."""
    out: dict[str, Path] = {}
    for package, folder in roots.items():
        for path in folder.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((package, *parts))] = path
    return out


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name ``from <level dots><name> import ...`` means in ``module``."""
    if not level:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _literal_import(node: ast.Call, module: str, is_package: bool) -> str | None | bool:
    """``importlib.import_module("x", package)`` / ``__import__("x")``: the module named;
    None when the call imports nothing; False when the name is computed."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return False
    text = first.value
    level = len(text) - len(text.lstrip("."))
    return _resolve(module, is_package, level, text.lstrip(".") or None)


def imports(module: str, path: Path, known: dict[str, Path]) -> tuple[set[str], bool]:
    """The modules of ``known`` that ``module`` imports, anywhere in it (functions and
    ``if TYPE_CHECKING:`` blocks too), and whether it also imports by a computed name."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    dynamic = False

    def add(target: str) -> None:
        # The module itself, else its nearest enclosing module we know (``a.b.Name``).
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target:
            found.add(target)

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(module, is_package, node.level, node.module)
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                add(sub if sub in known else target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.Call):
            named = _literal_import(node, module, is_package)
            if named is False:
                dynamic = True
            elif named:
                add(named)
    found.discard(module)
    return found, dynamic


def graph(roots: dict[str, Path], dynamic: dict[str, Callable[[], set[str]]] | None = None) -> dict[str, set[str]]:
    """module -> the modules it imports. A module that imports by a computed name must say
    where to (``dynamic``), else the graph would miss edges."""
    known = modules(roots)
    edges: dict[str, set[str]] = {}
    for module, path in known.items():
        found, computed = imports(module, path, known)
        if computed:
            if dynamic is None or module not in dynamic:
                raise AssertionError(f"{module} imports by a computed name: say where to (DYNAMIC)")
            found |= {m for m in dynamic[module]() if m in known} - {module}
        edges[module] = found
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    counter = itertools.count()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = next(counter)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def a_cycle(edges: dict[str, set[str]], component: list[str]) -> list[str]:
    """One closed path through ``component``: what the failure message shows."""
    inside = set(component)
    start = component[0]
    path, seen = [start], {start}
    while True:
        step = min(w for w in edges[path[-1]] if w in inside)
        if step in seen:
            return path[path.index(step):] + [step]
        path.append(step)
        seen.add(step)


def layer_of(module: str, package: str = NAME) -> str:
    relative = module.removeprefix(package).lstrip(".")
    for name, prefixes in LAYERS:
        for p in prefixes:
            if relative == p or (p and relative.startswith(p + ".")):
                return name
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def upward(edges: dict[str, set[str]]) -> Iterator[tuple[str, str]]:
    for module, targets in sorted(edges.items()):
        for target in sorted(targets):
            if RANK[layer_of(target)] > RANK[layer_of(module)]:
                yield module, target


@pytest.fixture(scope="module")
def edges() -> dict[str, set[str]]:
    return graph(ROOTS, DYNAMIC)


# --- the package ---------------------------------------------------------------------------


def test_every_module_has_a_layer(edges):
    for module in edges:
        layer_of(module)


def test_imports_go_down_the_layers(edges):
    found = [f"{m} ({layer_of(m)}) imports {t} ({layer_of(t)})" for m, t in upward(edges)]
    assert not found, "imports of a layer above:\n" + "\n".join(found)


def test_no_import_cycle(edges):
    found = [" -> ".join(a_cycle(edges, c)) for c in cycles(edges)]
    assert not found, "import cycles (every import counted):\n" + "\n".join(found)


def test_the_lazy_exports_are_in_the_graph(edges):
    """The front door's names and the CLI's commands are imported by computed names: the
    graph holds where they go."""
    assert {f"{NAME}.conversation", f"{NAME}.view", f"{NAME}.events", f"{NAME}.errors"} <= edges[NAME]
    assert f"{NAME}.cli.commands_replay" in edges[f"{NAME}.cli"]


# What a condenser may see: a strategy takes a view and a token source and returns a View or
# a Condensation; the conversation that runs it and the storage that keeps it are not its
# business (``conversation.condensing.Strategy`` is the seam).
STRATEGY_PACKAGES = (f"{NAME}.condensers", f"{NAME}.summarizers")
NOT_FOR_STRATEGIES = ("conversation", "replay", "storage", "database", "migrate", "io", "inspection")


def test_condensers_know_neither_the_conversation_nor_storage(edges):
    reached = {
        m: sorted(d for d in targets if d.removeprefix(NAME + ".").split(".")[0] in NOT_FOR_STRATEGIES)
        for m, targets in edges.items() if m.startswith(STRATEGY_PACKAGES)
    }
    assert not {m: r for m, r in reached.items() if r}


# --- the checker, on small packages it must judge ---------------------------------------------


def package(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    """A package ``pkg`` made of ``files`` (path -> source)."""
    root = tmp_path / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(text)
    return {"pkg": root}


def test_the_checker_finds_a_cycle_through_a_lazy_import(tmp_path):
    roots = package(tmp_path, {
        "a.py": "from .b import thing\n",
        "b.py": "def thing():\n    from . import a\n    return a\n",
    })
    edges = graph(roots)
    assert edges["pkg.a"] == {"pkg.b"} and edges["pkg.b"] == {"pkg.a"}
    assert cycles(edges) == [["pkg.a", "pkg.b"]]


def test_the_checker_finds_a_cycle_through_a_type_only_import(tmp_path):
    roots = package(tmp_path, {
        "store.py": "from .conv import Conversation\n",
        "conv.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .store import Store\n",
    })
    assert cycles(graph(roots)) == [["pkg.conv", "pkg.store"]]


def test_the_checker_finds_a_cycle_through_a_package_init_and_a_literal_import_module(tmp_path):
    roots = package(tmp_path, {
        "sub/__init__.py": "from .x import X\n",
        "sub/x.py": "def f():\n    import importlib\n    return importlib.import_module('pkg.y')\n",
        "y.py": "import pkg.sub\n",
    })
    edges = graph(roots)
    assert edges["pkg.sub"] == {"pkg.sub.x"} and edges["pkg.sub.x"] == {"pkg.y"} and edges["pkg.y"] == {"pkg.sub"}
    assert cycles(edges) == [["pkg.sub", "pkg.sub.x", "pkg.y"]]


def test_the_checker_resolves_relative_imports_and_names(tmp_path):
    roots = package(tmp_path, {
        "a/__init__.py": "from . import b\nfrom .b import f\n",
        "a/b.py": "from .. import c\nfrom ..c import Name\nfrom ...outside import x\n",
        "c.py": "import pkg.a.b as b\n",
    })
    edges = graph(roots)
    assert edges["pkg.a"] == {"pkg.a.b"}
    assert edges["pkg.a.b"] == {"pkg.c"}  # nothing outside the package
    assert edges["pkg.c"] == {"pkg.a.b"}
    assert cycles(edges) == [["pkg.a.b", "pkg.c"]]


def test_the_checker_refuses_an_import_it_cannot_follow(tmp_path):
    roots = package(tmp_path, {"a.py": "import importlib\nname = 'pkg.b'\nimportlib.import_module(name)\n"})
    with pytest.raises(AssertionError, match="computed name"):
        graph(roots)
    assert graph(roots, {"pkg.a": lambda: {"pkg"}})["pkg.a"] == {"pkg"}


def test_the_checker_reports_an_import_of_a_layer_above():
    fake = {f"{NAME}.storage.x": {f"{NAME}.cli"}, f"{NAME}.view.y": {f"{NAME}.conversation.store"}, f"{NAME}.cli": set()}
    assert list(upward(fake)) == [(f"{NAME}.storage.x", f"{NAME}.cli"), (f"{NAME}.view.y", f"{NAME}.conversation.store")]


def test_an_acyclic_package_passes(tmp_path):
    roots = package(tmp_path, {
        "low.py": "X = 1\n",
        "mid.py": "from typing import TYPE_CHECKING\nfrom .low import X\nif TYPE_CHECKING:\n    from . import low\n",
        "top.py": "def f():\n    from .mid import X\n    return X\n",
    })
    assert cycles(graph(roots)) == []
