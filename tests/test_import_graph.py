"""No import circle among the modules of emu, models and validation.

The graph is read from the source with ast: every ``import`` and ``from … import``, at module level
and inside functions alike (a function-local import that closes a circle is still a circle, only a
hidden one), relative imports resolved. ``from pkg import name`` is an edge to ``pkg.name`` when that
is a module, else to ``pkg``; importing ``a.b.c`` also runs the ``__init__`` of ``a.b`` (and of
``a``), so it is an edge to those packages too, except to the importer's own packages (they are
being imported already). Imports of optional dependencies (matplotlib, dask, tqdm) stay lazy; they
are outside these packages and not part of the graph.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("emu", "models", "validation")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, set[str]]:
    """{module: the modules of ``packages`` it imports} for every ``.py`` file under ``root/<package>``."""
    files = {module_name(f, root): f for p in packages for f in sorted((root / p).rglob("*.py"))}

    def known(name: str) -> str | None:  # the module an imported name lives in
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found = [known(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                found = [f"{source}.{a.name}" if f"{source}.{a.name}" in files else known(source) for a in node.names]
            else:
                continue
            for target in found:
                if target is None or target == mod:
                    continue
                targets.add(target)
                targets.update(a for a in _ancestors(target) if a in files and a not in _ancestors(mod))
        targets.discard(mod)
        graph[mod] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, …, a], or None (depth-first search, nodes in sorted order)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_cycle():
    graph = import_graph()
    assert len(graph) >= 80, "the graph should hold every module of emu, models and validation"
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_planted_circle(tmp_path):
    """The checker itself: a function-local import closing a circle through a package __init__ is found,
    and the same modules without it are not."""
    pkg = tmp_path / "validation"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .b import B\n")
    (pkg / "sub" / "b.py").write_text("B = 1\n")
    (pkg / "a.py").write_text("from validation.sub.b import B\n")
    assert find_cycle(import_graph(tmp_path, ("validation",))) is None
    (pkg / "sub" / "b.py").write_text("B = 1\n\n\ndef f():\n    from .. import a\n")
    cycle = find_cycle(import_graph(tmp_path, ("validation",)))
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) == {"validation.a", "validation.sub", "validation.sub.b"}
    assert find_cycle({"x": {"y"}, "y": {"z"}, "z": set()}) is None
    assert find_cycle({"x": {"y"}, "y": {"x"}}) == ["x", "y", "x"]
