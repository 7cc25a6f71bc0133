"""House rules that keep the code readable: no import loops, modules of one job.

The import graph is read from the source (``ast``), not by importing: an edge
``a -> b`` is any import of pt2kit module ``b`` in ``a`` outside ``if TYPE_CHECKING:``,
at module level or inside a function. A lazy import (a heavy or optional part loaded
when a feature runs) still ties ``a`` to ``b``: hiding an edge in a function does not
make a loop go away, it only makes it run later.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGES = ("minifier", "replay", "validation", "explain", "opcheck")

#: Modules allowed past ~400 lines, each with its reason.
LARGE_FOR_A_REASON = {
    # its source is copied verbatim into standalone replay scripts (replay/script.py),
    # which must need torch alone: it cannot import a sibling module
    "replay.rebuild": 700,
}
LINE_LIMIT = 470


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(tree: ast.Module) -> list[ast.stmt]:
    """Every import statement, at module level or in a function, except those under ``if TYPE_CHECKING:``."""
    typing_only = {
        id(inner)
        for stmt in ast.walk(tree)
        if isinstance(stmt, ast.If) and "TYPE_CHECKING" in ast.unparse(stmt.test)
        for inner in ast.walk(ast.Module(body=stmt.body, type_ignores=[]))
    }
    return [stmt for stmt in ast.walk(tree) if isinstance(stmt, (ast.Import, ast.ImportFrom)) and id(stmt) not in typing_only]


def import_graph() -> dict[str, set[str]]:
    """pt2kit module -> the pt2kit modules importing it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        for stmt in _imports(tree):
            if isinstance(stmt, ast.Import):
                targets = [alias.name for alias in stmt.names]
            else:
                base = _resolve(name, stmt, path.name == "__init__.py")
                targets = [base] + [f"{base}.{alias.name}" for alias in stmt.names]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
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

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def _is_package_init(name: str, target: str) -> bool:
    # importing a submodule imports its package's __init__ first: a package that
    # re-exports its submodules is not a loop with them
    return target == name.rsplit(".", 1)[0]


def test_the_import_graph_reader_finds_a_planted_loop():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_counts_imports_in_functions_but_not_typing_only_ones():
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .typing_only import T\n"
        "def f():\n    from .lazy import g\n    return g\n"
    )
    found = {stmt.module for stmt in _imports(tree) if isinstance(stmt, ast.ImportFrom)}
    assert found == {"typing", "lazy"}


def test_no_import_loops_between_pt2kit_modules():
    graph = import_graph()
    assert len(graph) > 60 and any(graph.values())  # the reader sees the code
    graph = {name: {t for t in targets if not _is_package_init(name, t)} for name, targets in graph.items()}
    assert cycles(graph) == []


def test_modules_stay_small_unless_they_say_why():
    too_large = {}
    for name, path in _modules().items():
        lines = len(path.read_text().splitlines())
        if lines > LARGE_FOR_A_REASON.get(name, LINE_LIMIT):
            too_large[name] = lines
    assert too_large == {}
