"""Layers that depend one way, and no import cycles.

    cli  ->  condensers, io, inspection  ->  conversation  ->  view  ->  storage  ->  events and schema

Every import in the package counts, lazy ones inside functions and ``if TYPE_CHECKING:``
ones too: a module may import its own layer or any layer below it, never one above, not
even for a type. Cycles are judged on the imports that run (lazy ones included: a cycle
that only shows at run time is still a cycle); a type-only import back into a module that
imports this one (``Conversation`` naming its ``EventStore``) is how a type checker is told
about a relation the code already has, not a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "openhands_memory"

# The first matching prefix decides a module's layer (names relative to the package).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("cli", ("cli",)),
    ("condensers, io, inspection", (
        "condensers", "summarizers", "llm", "config", "io", "inspection", "integrations", "data",
    )),
    ("conversation", ("conversation", "replay")),
    ("view", ("view",)),
    ("storage", ("storage", "database", "sqlite_file", "files", "migrate", "migrations")),
    ("events and schema", ("events", "errors", "schema", "ranges", "settings", "allocation", "searchable")),
]
RANK = {name: i for i, (name, _) in enumerate(reversed(LAYERS))}


def layer_of(module: str) -> str:
    for name, prefixes in LAYERS:
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return name
    raise AssertionError(f"openhands_memory.{module} is in no layer: add it to LAYERS")


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            out[".".join(parts)] = path
    return out


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports(module: str, path: Path, known: dict[str, Path], *, types: bool = True) -> set[str]:
    """The package modules ``module`` imports (``types=False``: only those that run)."""
    tree = ast.parse(path.read_text())
    skip = set() if types else _type_checking_lines(tree)
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if module else []
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("openhands_memory"):
                target = node.module.removeprefix("openhands_memory").lstrip(".")
            else:
                continue
            names = [f"{target}.{a.name}".lstrip(".") for a in node.names]
            subs = [n for n in names if n in known]
            if subs:  # "from . import x": the submodules themselves
                found.update(subs)
            elif target:
                found.add(target)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("openhands_memory."):
                    found.add(a.name.removeprefix("openhands_memory."))
    return {m for m in found if m and m != module}


def graph(*, types: bool = True) -> dict[str, set[str]]:
    known = modules()
    return {m: imports(m, p, known, types=types) for m, p in known.items()}


def test_every_module_has_a_layer():
    for module in modules():
        layer_of(module)


@pytest.mark.parametrize("module", sorted(modules()))
def test_imports_go_down_the_layers(module):
    mine = RANK[layer_of(module)]
    upward = [d for d in graph()[module] if RANK[layer_of(d)] > mine]
    assert not upward, f"{module} ({layer_of(module)}) imports a layer above it: {sorted(upward)}"


def test_no_import_cycles():
    edges = graph(types=False)
    seen: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(m: str) -> None:
        seen[m] = 1
        stack.append(m)
        for d in sorted(edges.get(m, ())):
            # A package imports its own submodules to re-export them: not a cycle.
            if d.startswith(m + "."):
                continue
            if seen.get(d) == 1:
                cycle = stack[stack.index(d):] + [d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in seen:
                visit(d)
        stack.pop()
        seen[m] = 2

    for m in sorted(edges):
        if m not in seen:
            visit(m)


def test_the_checker_sees_a_violation(tmp_path):
    """The test can fail: a lower module importing a higher one is reported."""
    fake = {"storage.x": tmp_path / "x.py", "cli": tmp_path / "c.py"}
    fake["storage.x"].write_text("def f():\n    from ..cli import main\n")
    assert imports("storage.x", fake["storage.x"], fake) == {"cli"}
    assert RANK[layer_of("cli")] > RANK[layer_of("storage.x")]


def test_the_checker_sees_a_type_only_import(tmp_path):
    """An import under ``if TYPE_CHECKING:`` still names a dependency, so it still counts."""
    fake = {"storage.x": tmp_path / "x.py", "cli": tmp_path / "c.py"}
    fake["storage.x"].write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..cli import main\n")
    assert imports("storage.x", fake["storage.x"], fake) == {"cli"}
    assert imports("storage.x", fake["storage.x"], fake, types=False) == set()


# What a condenser may see: a strategy takes a view and a token source and returns a View or
# a Condensation; the conversation that runs it and the storage that keeps it are not its
# business (``conversation.condensing.Strategy`` is the seam).
STRATEGY_PACKAGES = ("condensers", "summarizers")
NOT_FOR_STRATEGIES = ("conversation", "storage", "database", "migrate", "io", "inspection")


@pytest.mark.parametrize("module", sorted(m for m in modules() if m.startswith(STRATEGY_PACKAGES)))
def test_condensers_know_neither_the_conversation_nor_storage(module):
    reached = [d for d in graph()[module] if d.split(".")[0] in NOT_FOR_STRATEGIES]
    assert not reached, f"{module} imports {sorted(reached)}"
